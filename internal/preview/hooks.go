package preview

import (
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/afterhooks"
)

// Hook is one hook an action runs.
type Hook struct {
	// Phase is the hook event it runs for (pre-upgrade, post-install…).
	Phase  string `json:"phase"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Weight int    `json:"weight"`
	// DeletePolicies are the hook's helm.sh/hook-delete-policy; empty:
	// Helm's default, before-hook-creation.
	DeletePolicies []string `json:"deletePolicies,omitempty"`
}

// hooksOf returns the hooks of hooks that run for event, in the order
// Helm runs them (see afterhooks.HooksInRunOrder).
func hooksOf(hooks []*releasev1.Hook, event releasev1.HookEvent) []Hook {
	run := afterhooks.HooksInRunOrder(hooks, event)
	out := make([]Hook, 0, len(run))
	for _, h := range run {
		hook := Hook{Phase: string(event), Kind: h.Kind, Name: h.Name, Weight: h.Weight}
		for _, p := range h.DeletePolicies {
			hook.DeletePolicies = append(hook.DeletePolicies, string(p))
		}
		out = append(out, hook)
	}
	return out
}
