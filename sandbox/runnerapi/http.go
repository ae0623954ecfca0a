package runnerapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// NewHTTPClient returns a client for a runner served on TCP at baseURL
// (http://host:port), sending token with every request: the way a backend whose
// boxes live on other machines (a Kubernetes Sandbox's service) reaches them.
// hc, when not nil, lends its transport's dialer for the port relay; requests go
// through the client's own transport, which keeps the relay's upgraded
// connections apart from pooled ones.
func NewHTTPClient(baseURL, token string, hc *http.Client) *Client {
	host := baseURL
	if u, err := url.Parse(baseURL); err == nil && u.Host != "" {
		host = u.Host
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		if tr, ok := transportOf(hc); ok && tr.DialContext != nil {
			return tr.DialContext(ctx, "tcp", host)
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return nil, fmt.Errorf("dial runner at %s: %w", host, err)
		}
		return conn, nil
	}
	return NewDialClient(dial, token)
}

func transportOf(hc *http.Client) (*http.Transport, bool) {
	if hc == nil {
		return nil, false
	}
	tr, ok := hc.Transport.(*http.Transport)
	return tr, ok
}
