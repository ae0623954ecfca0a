// Package web holds the web console's built files (web/dist, from `make build`),
// embedded in the binary so that serving the console needs no Node at run time.
package web

import (
	"embed"
	"io/fs"
)

// dist is written by the console's Vite build; only its .keep is committed, so a
// binary built before the console serves a page that says how to build it.
//
//go:embed all:dist
var dist embed.FS

// Console returns the console's built files, rooted at index.html.
func Console() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the directory is embedded: Sub cannot fail
	}
	return sub
}
