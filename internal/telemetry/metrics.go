package telemetry

import (
	"context"
	"database/sql"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Metric names the dashboard (deploy/grafana) and docs/observability.md refer to.
const (
	MetricHTTPDuration         = "astrabox_http_request_duration_seconds"
	MetricInputsAccepted       = "astrabox_inputs_accepted_total"
	MetricInputsAdmitted       = "astrabox_inputs_admitted_total"
	MetricInputsHandedOver     = "astrabox_inputs_handed_over_total"
	MetricCustodyHeld          = "astrabox_custody_inputs"
	MetricCustodyAge           = "astrabox_custody_oldest_age_seconds"
	MetricCustodyDuration      = "astrabox_custody_duration_seconds"
	MetricPartsCommitted       = "astrabox_parts_committed_total"
	MetricRelayLag             = "astrabox_relay_lag_seconds"
	MetricSessionLogMirror     = "astrabox_session_log_mirror_seconds"
	MetricSSEFollowers         = "astrabox_sse_followers"
	MetricStreamCatchUps       = "astrabox_stream_catchups_total"
	MetricBoxes                = "astrabox_boxes"
	MetricPrewarmReady         = "astrabox_prewarm_pool_ready"
	MetricActivityFailures     = "astrabox_activity_failures_total"
	MetricDeadWorkers          = "astrabox_dead_workers_total"
	MetricDeadWorkerActivities = "astrabox_dead_worker_activities_failed_total"
)

// The kinds of a Relay's batch, the batch label of MetricRelayLag.
const (
	// RelayBatchParts is a batch of parts alone (a streaming reply), written with
	// other Relays' in one statement.
	RelayBatchParts = "parts"
	// RelayBatchFacts is a batch with facts (a reply's start or end, an interaction,
	// the program's status...), written in one transaction with other Relays'.
	RelayBatchFacts = "facts"
	// RelayBatchAdmission is a batch that admits an input: before it is written, the
	// program's session log is mirrored.
	RelayBatchAdmission = "admission"
)

// scrapeTimeout bounds what a scrape waits for a collector that asks the database
// or the sandbox backend, so a slow dependency never hangs /metrics.
const scrapeTimeout = 3 * time.Second

// Metrics are one process's Prometheus metrics, all in one registry (no global
// registry is used): the platform's own series, the Go runtime's and the Temporal
// SDK's (TemporalMetricsHandler). The zero of every series is registered up front so
// dashboards see it before the first event.
type Metrics struct {
	registry *prometheus.Registry
	log      *zap.Logger

	// HTTPDuration is the API's request latency by method, route template and status.
	HTTPDuration *prometheus.HistogramVec
	// InputsAccepted counts new inputs written into custody (a repeated
	// client_message_id is not counted again).
	InputsAccepted prometheus.Counter
	// InputsAdmitted counts inputs a runtime reported admitted (custody closed).
	InputsAdmitted prometheus.Counter
	// InputsHandedOver counts inputs handed to a runtime, by source: the content its
	// notification carried ("notice") or a read of the held inputs ("read").
	InputsHandedOver *prometheus.CounterVec
	// CustodyDuration is how long each admitted input was in custody, from its
	// acceptance to the runtime's admission.
	CustodyDuration prometheus.Histogram
	// PartsCommitted counts output parts Relays committed to the output log.
	PartsCommitted prometheus.Counter
	// RelayLag is how long a batch of runtime events waited between the Relay reading
	// its first event and the batch's commit in PostgreSQL, by the batch's kind
	// (RelayBatchParts, RelayBatchFacts, RelayBatchAdmission).
	RelayLag *prometheus.HistogramVec
	// SessionLogMirror is how long each mirror of a program's session log took: the
	// reads of its files through the box's runner and the write of the new entries,
	// except before an input's admission, which waits for the reads and writes the
	// entries in its own batch's transaction.
	SessionLogMirror prometheus.Histogram
	// SSEFollowers is the number of open output streams on this API process.
	SSEFollowers prometheus.Gauge
	// StreamCatchUps counts how output streams caught up with new parts: from the
	// frames a notification carried ("notice") or from a read of the output log ("log").
	StreamCatchUps *prometheus.CounterVec
	// ActivityFailures counts activity attempts that returned an error, by activity type.
	ActivityFailures *prometheus.CounterVec
	// DeadWorkers counts the workers this worker found dead and claimed
	// (worker/hostwatch).
	DeadWorkers prometheus.Counter
	// DeadWorkerActivities counts the activity attempts of dead workers this worker
	// failed, so that their Sessions went on at once, by activity type.
	DeadWorkerActivities *prometheus.CounterVec
}

// NewMetrics returns a fresh registry with the platform's series and the Go runtime
// and process collectors.
func NewMetrics(log *zap.Logger) *Metrics {
	if log == nil {
		log = zap.NewNop()
	}
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		log:      log,
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricHTTPDuration,
			Help:    "API request latency by method, route template and status (streams: until they end).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route", "status"}),
		InputsAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricInputsAccepted,
			Help: "Inputs written into custody (repeats of a client_message_id not counted).",
		}),
		InputsAdmitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricInputsAdmitted,
			Help: "Inputs a runtime reported admitted, closing their custody.",
		}),
		InputsHandedOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricInputsHandedOver,
			Help: "Inputs handed to a runtime, by source: the content their notification carried (notice) or a read of the held inputs (read).",
		}, []string{"source"}),
		CustodyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricCustodyDuration,
			Help:    "Time each admitted input spent in custody, from acceptance to the runtime's admission.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600},
		}),
		PartsCommitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPartsCommitted,
			Help: "Output parts Relays committed to the Sessions' output logs.",
		}),
		RelayLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRelayLag,
			Help:    "Time from a Relay reading a batch's first runtime event to the batch's commit, by the batch's kind: parts alone, other facts, or an input's admission (which waits for the session log's mirror).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"batch"}),
		SessionLogMirror: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricSessionLogMirror,
			Help:    "Time each mirror of a program's session log took: its reads through the box's runner and the write of its new entries (before an input's admission, the reads alone: the admission's batch writes the entries).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
		SSEFollowers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricSSEFollowers,
			Help: "Open Session output streams (SSE) on this API process.",
		}),
		StreamCatchUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricStreamCatchUps,
			Help: "Output streams catching up with new parts, by source: the notification's own frames (notice) or a read of the output log (log).",
		}, []string{"source"}),
		ActivityFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricActivityFailures,
			Help: "Activity attempts that returned an error, by activity type.",
		}, []string{"activity_type"}),
		DeadWorkers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricDeadWorkers,
			Help: "Workers this worker found dead (their beat stopped) and claimed.",
		}),
		DeadWorkerActivities: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDeadWorkerActivities,
			Help: "Activity attempts of dead workers this worker failed so that their Sessions went on at once, by activity type.",
		}, []string{"activity_type"}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.HTTPDuration, m.InputsAccepted, m.InputsAdmitted, m.InputsHandedOver, m.CustodyDuration, m.PartsCommitted,
		m.RelayLag, m.SessionLogMirror, m.SSEFollowers, m.StreamCatchUps, m.ActivityFailures, m.DeadWorkers, m.DeadWorkerActivities,
	)
	for _, source := range []string{"notice", "log"} {
		m.StreamCatchUps.WithLabelValues(source)
	}
	for _, source := range []string{"notice", "read"} {
		m.InputsHandedOver.WithLabelValues(source)
	}
	for _, batch := range []string{RelayBatchParts, RelayBatchFacts, RelayBatchAdmission} {
		m.RelayLag.WithLabelValues(batch)
	}
	// The activities that heartbeat, whose loss Temporal notices latest.
	for _, activityType := range []string{"Relay", "PrepareRuntime", "ActivateRuntime"} {
		m.DeadWorkerActivities.WithLabelValues(activityType)
	}
	return m
}

// Registry is the process's registry, for the Temporal SDK's exporter and tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorLog:      zap.NewStdLog(m.log),
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.registry,
	})
}

// WatchDatabase registers the connection pool's series (database/sql's statistics,
// read at each scrape): go_sql_in_use_connections against
// go_sql_max_open_connections, and the waits for a free connection
// (go_sql_wait_count_total, go_sql_wait_duration_seconds_total), the first sign that
// a process's statements queue for its pool (database.max_open_conns) rather than for
// PostgreSQL.
func (m *Metrics) WatchDatabase(pool *sql.DB) {
	m.registry.MustRegister(collectors.NewDBStatsCollector(pool, DatabaseName))
}

// DatabaseName is the db_name label of the connection pool's series.
const DatabaseName = "astrabox"

// CustodyFunc reports the inputs held in custody and the oldest one's age.
type CustodyFunc func(ctx context.Context) (held int64, oldest time.Duration, err error)

// WatchCustody registers the custody gauges, read from f at each scrape. An API
// process registers them (every replica reports the same database-wide figures;
// dashboards take the max).
func (m *Metrics) WatchCustody(f CustodyFunc) {
	m.registry.MustRegister(&scrapeCollector{
		log: m.log,
		descs: []*prometheus.Desc{
			prometheus.NewDesc(MetricCustodyHeld, "Inputs accepted and not yet admitted by a runtime (open Sessions).", nil, nil),
			prometheus.NewDesc(MetricCustodyAge, "Age of the oldest input in custody (open Sessions); 0 when none is held.", nil, nil),
		},
		collect: func(ctx context.Context, descs []*prometheus.Desc, ch chan<- prometheus.Metric) error {
			held, oldest, err := f(ctx)
			if err != nil {
				return err
			}
			ch <- prometheus.MustNewConstMetric(descs[0], prometheus.GaugeValue, float64(held))
			ch <- prometheus.MustNewConstMetric(descs[1], prometheus.GaugeValue, oldest.Seconds())
			return nil
		},
	})
}

// Admitted counts inputs a runtime admitted, each with the time it spent in custody.
func (m *Metrics) Admitted(custody []time.Duration) {
	m.InputsAdmitted.Add(float64(len(custody)))
	for _, d := range custody {
		m.CustodyDuration.Observe(d.Seconds())
	}
}

// BoxStatesFunc counts this process's boxes by state.
type BoxStatesFunc func(ctx context.Context) (map[string]int, error)

// WatchBoxes registers the boxes-by-state gauge, read from f at each scrape; states
// lists the states always reported (as 0 when no box is in one).
func (m *Metrics) WatchBoxes(states []string, f BoxStatesFunc) {
	m.registry.MustRegister(&scrapeCollector{
		log:   m.log,
		descs: []*prometheus.Desc{prometheus.NewDesc(MetricBoxes, "Boxes this worker's sandbox backend knows, by state.", []string{"state"}, nil)},
		collect: func(ctx context.Context, descs []*prometheus.Desc, ch chan<- prometheus.Metric) error {
			counts, err := f(ctx)
			if err != nil {
				return err
			}
			for _, s := range states {
				if _, ok := counts[s]; !ok {
					counts[s] = 0
				}
			}
			for state, n := range counts {
				ch <- prometheus.MustNewConstMetric(descs[0], prometheus.GaugeValue, float64(n), state)
			}
			return nil
		},
	})
}

// PoolDepthFunc returns the ready boxes of each prewarm pool, by pool key (the
// RuntimeProfile id).
type PoolDepthFunc func() map[string]int

// WatchPrewarm registers the prewarm pool depth gauge, read from f at each scrape.
func (m *Metrics) WatchPrewarm(f PoolDepthFunc) {
	m.registry.MustRegister(&scrapeCollector{
		log:   m.log,
		descs: []*prometheus.Desc{prometheus.NewDesc(MetricPrewarmReady, "Prewarmed boxes ready to be claimed, by RuntimeProfile.", []string{"runtime_profile"}, nil)},
		collect: func(_ context.Context, descs []*prometheus.Desc, ch chan<- prometheus.Metric) error {
			for key, n := range f() {
				ch <- prometheus.MustNewConstMetric(descs[0], prometheus.GaugeValue, float64(n), key)
			}
			return nil
		},
	})
}

// scrapeCollector reads its values when scraped. A failing read is logged and its
// series left out of that scrape (an absent series, not a false zero).
type scrapeCollector struct {
	log     *zap.Logger
	descs   []*prometheus.Desc
	collect func(ctx context.Context, descs []*prometheus.Desc, ch chan<- prometheus.Metric) error
}

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if err := c.collect(ctx, c.descs, ch); err != nil {
		c.log.Warn("collect metrics", zap.String("metric", c.descs[0].String()), zap.Error(err))
	}
}
