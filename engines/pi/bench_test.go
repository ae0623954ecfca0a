package pi_test

import (
	"context"
	"testing"
)

// BenchmarkTranslateRecording measures translating a whole recorded conversation
// (message_while_streaming: a run joined by a steering message) from the journal, the work
// a reader does when it resumes from the start; it reports events per second.
func BenchmarkTranslateRecording(b *testing.B) {
	rec := loadRecording(b, "message_while_streaming")
	c, _ := replayClient(b, rec)
	ctx := context.Background()
	events := 0
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range c.Events(ctx, nil) {
			if err != nil {
				break
			}
			events++
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(len(rec.journal)), "lines/op")
}

// BenchmarkResumeFromCursor measures resuming after the middle event of a recording:
// decoding the cursor's state and translating the rest.
func BenchmarkResumeFromCursor(b *testing.B) {
	c, _ := replayClient(b, loadRecording(b, "message_while_streaming"))
	all := readAll(b, c)
	mid := all[len(all)/2].EventCursor()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range c.Events(ctx, &mid) {
			if err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(len(mid.Position)), "cursor-bytes")
}
