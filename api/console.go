package api

import (
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"
)

// consoleNotBuilt is served at the console's paths by a binary built before the
// console's files were (plain `go build` on a fresh checkout).
const consoleNotBuilt = `<!doctype html><title>AstraBox</title><p>The web console is not built into this binary.
Run <code>make build</code> (it builds the console, then the binary). The API is at <a href="/docs">/docs</a>.`

// serveConsole answers a GET outside /api/ with the web console: a built file when
// the path names one (hashed assets are cached for good), else index.html, so that the
// console's own paths (/sessions/..., /s/...) load it. It reports false for paths it
// leaves to the API's 404.
func (s *Server) serveConsole(c *gin.Context) bool {
	p := c.Request.URL.Path
	if s.console == nil || (c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead) ||
		p == "/api" || strings.HasPrefix(p, "/api/") {
		return false
	}
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// Share links carry their token in the path: never send it on as a Referer.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data: blob:; "+
		"style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	name := strings.TrimPrefix(path.Clean(p), "/")
	if name != "" && name != "index.html" {
		if st, err := fs.Stat(s.console, name); err == nil && !st.IsDir() {
			if strings.HasPrefix(name, "assets/") {
				h.Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			c.FileFromFS(name, http.FS(s.console))
			return true
		}
	}
	index, err := fs.ReadFile(s.console, "index.html")
	h.Set("Cache-Control", "no-cache")
	if err != nil {
		c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(consoleNotBuilt))
		return true
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", index)
	return true
}
