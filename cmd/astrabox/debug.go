package main

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"go.uber.org/zap"
)

// debugServer serves Go's profiles and runtime figures on debug.pprof_addr until
// ctx ends; with no address it does nothing. It has its own mux and listener so
// nothing of it is reachable through the API's address.
func debugServer(addr string, log *zap.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		if addr == "" {
			return nil
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.Handle("/debug/vars", expvar.Handler())
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("debug.pprof_addr: %w", err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		log.Info("debug profiles served", zap.String("url", "http://"+ln.Addr().String()+"/debug/pprof/"))
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("debug server: %w", err)
		}
		return nil
	}
}
