package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers SessionWorkflow on a worker of the shared task queue (a
// worker.Registrar).
func Register(r worker.Registry) { RegisterWorkflows(r) }

// RegisterWorkflows registers SessionWorkflow under SessionWorkflowName on any
// workflow registry, including a replayer.
func RegisterWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: SessionWorkflowName})
}
