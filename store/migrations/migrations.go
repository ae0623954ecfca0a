// Package migrations holds AstraBox's versioned SQL migrations, embedded in the
// binary. Files are named NNNN_name.up.sql and NNNN_name.down.sql; store runs them.
package migrations

import "embed"

// FS holds every migration file. It is read-only by construction (embed.FS).
//
//go:embed *.sql
var FS embed.FS
