package api

import (
	"encoding/json"
	"net/http"

	"go.uber.org/zap"
)

// RegisterProbes serves /healthz and /readyz on mux for a process that is not
// the API server (the worker has no API but runs in the same orchestrators).
// The answers are the API's own: /healthz is 200 while the process serves
// HTTP; /readyz runs checks as the API's /readyz does, 200 when all answer and
// 503 in the error envelope naming the failing ones otherwise.
func RegisterProbes(mux *http.ServeMux, checks []Check, log *zap.Logger) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeEnvelope(w, log, http.StatusOK, Envelope{Code: CodeOK, Message: "success", Data: map[string]string{"status": "up"}})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		results, err := runChecks(r.Context(), checks, log)
		if err != nil {
			apiErr := toAPIError(err, nil)
			setRetryAfter(w.Header(), apiErr.Status)
			writeEnvelope(w, log, apiErr.Status, Envelope{Code: apiErr.Code, Message: apiErr.Message, Data: apiErr.Data})
			return
		}
		writeEnvelope(w, log, http.StatusOK, Envelope{Code: CodeOK, Message: "success", Data: readyData(results)})
	})
}

func writeEnvelope(w http.ResponseWriter, log *zap.Logger, status int, body Envelope) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		log.Debug("write probe answer", zap.Error(err))
	}
}
