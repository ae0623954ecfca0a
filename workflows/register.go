package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers SessionWorkflow under SessionWorkflowName on a worker of the
// shared task queue.
func Register(r worker.Registry) {
	r.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: SessionWorkflowName})
}
