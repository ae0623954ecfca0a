package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/astrabox/astrabox/internal/logging"
	"github.com/astrabox/astrabox/internal/telemetry"
	"github.com/astrabox/astrabox/internal/testutil"
	"github.com/astrabox/astrabox/sandbox"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// dashboardFile is the Grafana dashboard shipped for the metrics.
const dashboardFile = "../../deploy/grafana/astrabox.json"

// metricName matches the series names the dashboard's queries use: the platform's,
// the Temporal SDK's, the Go runtime's and the process's.
var metricName = regexp.MustCompile(`\b(?:astrabox|temporal|go|process)_[a-z0-9_]+\b`)

// TestDashboardQueriesNameExistingMetrics checks every query of the Grafana dashboard
// against the series a process really exposes: the platform's registry with every
// collector registered, and the Temporal SDK's series after a worker ran a workflow
// whose activity failed once (so failure series exist too).
func TestDashboardQueriesNameExistingMetrics(t *testing.T) {
	t.Parallel()
	exposed := exposedNames(t)

	raw, err := os.ReadFile(filepath.FromSlash(dashboardFile))
	require.NoError(t, err)
	var dash struct {
		Title  string  `json:"title"`
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.UID)
	queries := 0
	for _, p := range flatten(dash.Panels) {
		for _, target := range p.Targets {
			queries++
			names := metricName.FindAllString(target.Expr, -1)
			require.NotEmpty(t, names, "panel %q: query %q names no metric", p.Title, target.Expr)
			for _, name := range names {
				assert.True(t, exposed[name], "panel %q: query %q names %s, which no process exposes", p.Title, target.Expr, name)
			}
		}
	}
	require.Greater(t, queries, 10)
	// Every platform series is on the dashboard.
	for _, name := range []string{telemetry.MetricHTTPDuration, telemetry.MetricInputsAccepted, telemetry.MetricInputsAdmitted,
		telemetry.MetricCustodyHeld, telemetry.MetricCustodyAge, telemetry.MetricCustodyDuration, telemetry.MetricPartsCommitted, telemetry.MetricRelayLag, telemetry.MetricSessionLogMirror,
		telemetry.MetricSSEFollowers, telemetry.MetricBoxes, telemetry.MetricPrewarmReady, telemetry.MetricActivityFailures,
		telemetry.MetricDeadWorkers, telemetry.MetricDeadWorkerActivities} {
		assert.Contains(t, string(raw), name)
	}
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func flatten(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// exposedNames returns every series name a process's registry exposes, with the
// _bucket, _sum and _count series of its histograms.
func exposedNames(t *testing.T) map[string]bool {
	t.Helper()
	ctx := testutil.ContextWithTimeout(t, 2*time.Minute)
	tel := telemetry.NewWithTracer(nil, testutil.Logger(t))
	m := tel.Metrics
	m.WatchCustody(func(context.Context) (int64, time.Duration, error) { return 0, 0, nil })
	m.WatchBackend(boxList{}, func() map[string]int { return map[string]int{"profile": 0} })
	st, _ := testutil.NewDB(t)
	m.WatchDatabase(st.Pool())
	m.HTTPDuration.WithLabelValues("GET", "/healthz", "200").Observe(0)
	m.ActivityFailures.WithLabelValues("Relay")
	m.RelayLag.WithLabelValues(telemetry.RelayBatchParts).Observe(0)

	handler, err := tel.TemporalMetricsHandler()
	require.NoError(t, err)
	interceptors, err := tel.TemporalInterceptors()
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: testutil.TemporalDevServer(t).FrontendHostPort(), MetricsHandler: handler,
		Interceptors: interceptors, Logger: logging.NewTemporal(testutil.Logger(t))})
	require.NoError(t, err)
	defer c.Close()
	queue := "dashboard-" + uuid.NewString()
	w := worker.New(c, queue, worker.Options{Interceptors: tel.WorkerInterceptors()})
	w.RegisterWorkflowWithOptions(failingOnceWorkflow, workflow.RegisterOptions{Name: "FailingOnce"})
	w.RegisterActivityWithOptions(failOnce, activity.RegisterOptions{Name: "FailOnce"})
	require.NoError(t, w.Start())
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "FailingOnce")
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))

	// The failed first attempt is counted by the worker interceptor, once.
	assert.Equal(t, 1.0, promtest.ToFloat64(m.ActivityFailures.WithLabelValues("FailOnce")))

	families, err := m.Registry().Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	var list []string
	for n := range names {
		if strings.HasPrefix(n, "temporal_") {
			list = append(list, n)
		}
	}
	sort.Strings(list)
	t.Logf("Temporal SDK series: %s", strings.Join(list, " "))
	return names
}

func failingOnceWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 10 * time.Millisecond}})
	return workflow.ExecuteActivity(ctx, "FailOnce").Get(ctx, nil)
}

func failOnce(ctx context.Context) error {
	if activity.GetInfo(ctx).Attempt == 1 {
		return errors.New("first attempt fails")
	}
	return nil
}

// boxList reports one running box.
type boxList struct{}

func (boxList) List(context.Context) ([]sandbox.Info, error) {
	return []sandbox.Info{{ID: "box", State: sandbox.StateRunning}}, nil
}
