package devmodel_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/devmodel"
)

// BenchmarkAnthropicStream measures one streamed Messages reply (a tool call
// with a thinking block) from request to message_stop over loopback.
func BenchmarkAnthropicStream(b *testing.B) {
	srv := devmodel.New(devmodel.Options{RequestLogSize: 16})
	if err := srv.Start(b.Context(), "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	body := `{"model":"claude-opus-5-5","max_tokens":100,"stream":true,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":"[[script:bash cmd=\"echo hi\" think=\"a short thought to stream\"]]"}]}`
	client := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("x-api-key", "k")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || !strings.Contains(string(data), "message_stop") {
			b.Fatalf("incomplete stream: %v", err)
		}
	}
}
