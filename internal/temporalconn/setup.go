package temporalconn

import (
	"context"
	"fmt"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
)

// SearchAttributeSetup is what EnsureSearchAttributes found and did.
type SearchAttributeSetup struct {
	// Added are the attributes it registered, by name.
	Added []string
	// Present are the attributes already registered with the wanted type.
	Present []string
}

// EnsureSearchAttributes registers on the namespace every custom search attribute of
// want (name -> type, "Keyword", "Text", "Int", ...) it lacks. It is idempotent: an
// attribute already registered with the same type is kept, and one registered with
// another type is an error naming it (a type cannot be changed in place).
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, want map[string]string) (SearchAttributeSetup, error) {
	var out SearchAttributeSetup
	types := make(map[string]enumspb.IndexedValueType, len(want))
	for name, kind := range want {
		t, err := enumspb.IndexedValueTypeFromString(kind)
		if err != nil {
			return out, fmt.Errorf("search attribute %s: unknown type %q", name, kind)
		}
		types[name] = t
	}
	listed, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return out, fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range sortedNames(types) {
		have, ok := listed.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = types[name]
		case have != types[name]:
			return out, fmt.Errorf("search attribute %s is registered on namespace %s as %s, not %s: remove it or use another namespace",
				name, namespace, have, types[name])
		default:
			out.Present = append(out.Present, name)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	if err != nil {
		return out, fmt.Errorf("add search attributes %v to namespace %s: %w", sortedNames(missing), namespace, err)
	}
	out.Added = sortedNames(missing)
	return out, nil
}

func sortedNames(m map[string]enumspb.IndexedValueType) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// SetCurrentVersion makes deploymentName.buildID the current Worker Deployment
// Version: new Session workflows start on it, and auto-upgrade ones move to it. The
// version must have pollers (its workers started) first; Temporal refuses otherwise.
func SetCurrentVersion(ctx context.Context, c client.Client, deploymentName, buildID string) error {
	h := c.WorkerDeploymentClient().GetHandle(deploymentName)
	if _, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID}); err != nil {
		return fmt.Errorf("set current version of worker deployment %s to %s: %w", deploymentName, buildID, err)
	}
	return nil
}

// currentVersionPoll is how often EnsureCurrentVersion looks again while the server
// does not know the deployment or its version yet (it learns them from the first polls).
const currentVersionPoll = 500 * time.Millisecond

// EnsureCurrentVersion makes deploymentName.buildID current when the deployment has no
// current version yet: the first versioned workers of a new deployment would otherwise
// wait for an operator before any workflow runs. A deployment with a current version
// is left alone (a rolling upgrade promotes its new build with SetCurrentVersion). It
// retries until the server knows the version or ctx ends, and reports whether it made
// this version current.
func EnsureCurrentVersion(ctx context.Context, c client.Client, deploymentName, buildID string) (bool, error) {
	h := c.WorkerDeploymentClient().GetHandle(deploymentName)
	for {
		desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err == nil {
			if desc.Info.RoutingConfig.CurrentVersion != nil {
				return false, nil
			}
			// The conflict token makes a racing promotion by another worker or an
			// operator win: this call then fails and the next look finds it current.
			_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID, ConflictToken: desc.ConflictToken})
			if err == nil {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("make %s the current version of worker deployment %s: %w (last: %v)", buildID, deploymentName, ctx.Err(), err)
		case <-time.After(currentVersionPoll):
		}
	}
}
