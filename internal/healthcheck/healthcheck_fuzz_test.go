package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// maxFuzzExpr bounds each fuzzed expression. The CEL programs have no cost
// limit, and without a comprehension nothing checks the context, so a few
// hundred bytes of nested string replace() calls allocate gigabytes; the
// fuzzer would only rediscover that (and die of it). Real expressions,
// conditions filters included, fit well within the bound.
const maxFuzzExpr = 128

// entryIndex finds the entry an error names, under either spelling: ours
// (healthCheckExprs[i]) or the CEL reader's (healthchecks[i]).
var entryIndex = regexp.MustCompile(`(?:healthCheckExprs|healthchecks)\[(\d+)\]`)

// FuzzCompile fuzzes one or two health check entries (apiVersion, kind and
// expressions) and the object a reader judges (its kind, generation and
// status, the latter as JSON the way the API server would hand it over).
// What must hold:
//   - Compile never panics;
//   - when it fails, the error names an entry, and that entry is at fault:
//     it fails on its own, or it repeats the group and kind of an earlier
//     one and the error says so;
//   - when it succeeds, the reader supports the covered kind, and reading an
//     object of that kind never panics and gives a status within a bounded
//     time: Current, Failed or InProgress with a message quoting the entry
//     that decided it (the kind's own entry before its group's), or Unknown
//     with the evaluation error as message; a stale observedGeneration is
//     InProgress whatever the expressions say; and reading again gives the
//     same answer.
func FuzzCompile(f *testing.F) {
	type seed struct {
		apiVersion, kind, current, inProgress, failed string
		apiVersion2, kind2, current2                  string
		objKind                                       string
		generation                                    int64
		status                                        string
	}
	const ready = "status.phase == 'Ready'"
	const conditions = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')"
	seeds := []seed{
		// From TestCompile and TestReaders.
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: ready, failed: "status.phase == 'Broken'",
			inProgress: "status.phase == 'Provisioning'", generation: 1, status: `{"phase": "Ready"}`},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: ready, failed: "status.phase == 'Broken'", generation: 1, status: `{"phase": "Broken"}`},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: ready, inProgress: "status.phase == 'Provisioning'", generation: 1, status: `{"phase": "Provisioning"}`},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: ready, generation: 1, status: `{"phase": "Other"}`},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: "true", inProgress: "true", failed: "true", generation: 1},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: ready, generation: 2, status: `{"phase": "Ready", "observedGeneration": 1}`},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: ready, generation: 1},
		{apiVersion: "e2e.afterhooks.io/v1", current: "has(status.phase)", objKind: "Widget", generation: 1, status: `{"phase": "x"}`},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: "status.phase =="},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: "true", failed: "status.("},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", inProgress: "true"},
		{apiVersion: "e2e.afterhooks.io/v1", kind: "Gadget", current: "true", apiVersion2: "e2e.afterhooks.io/v1", kind2: "Gadget", current2: "false"},
		{kind: "Gadget", current: "true"},
		{apiVersion: "a/b/c", kind: "Gadget", current: "true"},
		// A kind's own entry decides before its group's.
		{apiVersion: "e2e.afterhooks.io/v1", current: "false", apiVersion2: "e2e.afterhooks.io/v2", kind2: "Gadget", current2: "true", objKind: "Gadget", generation: 1},
		{apiVersion: "e2e.afterhooks.io/v1", current: "false", apiVersion2: "e2e.afterhooks.io/v2", current2: "true"},
		// Expressions as Flux users write them, and ones that cannot
		// evaluate to a boolean on any object.
		{apiVersion: "cert-manager.io/v1", kind: "Certificate", current: conditions,
			failed: "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')", generation: 3,
			status: `{"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}]}`},
		{apiVersion: "cert-manager.io/v1", kind: "Certificate", current: conditions, generation: 1,
			status: `{"conditions": [{"type": "Ready"}, "junk", null, 5]}`},
		{apiVersion: "v1", kind: "ConfigMap", current: "status.?phase.orValue('') == 'Ready'", generation: 1, status: `"text"`},
		{apiVersion: "example.com/v1beta1", kind: "Thing", current: "'x'", failed: "1/0 == 1", generation: 1, status: `{}`},
		{apiVersion: "example.com/v1beta1", kind: "Thing", current: "status.observedGeneration == metadata.generation",
			generation: 7, status: `{"observedGeneration": "7"}`},
		{apiVersion: "example.com/v1", kind: "Thing", current: "[1,2,3].map(a, [1,2,3].map(b, a * b)).size() > 2",
			inProgress: "status.replicas > 1.5", generation: -1, status: `{"replicas": 12345678901234567890}`},
	}
	for _, s := range seeds {
		f.Add(s.apiVersion, s.kind, s.current, s.inProgress, s.failed, s.apiVersion2, s.kind2, s.current2,
			s.objKind, s.generation, []byte(s.status))
	}
	f.Fuzz(func(t *testing.T, apiVersion, kind, current, inProgress, failed, apiVersion2, kind2, current2,
		objKind string, generation int64, statusJSON []byte) {
		// A HelmRelease reaches Compile decoded from JSON, so its strings
		// are valid UTF-8.
		for _, s := range []*string{&apiVersion, &kind, &current, &inProgress, &failed, &apiVersion2, &kind2, &current2, &objKind} {
			if len(*s) > maxFuzzExpr {
				*s = (*s)[:maxFuzzExpr]
			}
			*s = strings.ToValidUTF8(*s, "\uFFFD")
		}
		exprs := []kustomize.CustomHealthCheck{{APIVersion: apiVersion, Kind: kind,
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: current, InProgress: inProgress, Failed: failed}}}
		if apiVersion2 != "" || kind2 != "" || current2 != "" {
			exprs = append(exprs, kustomize.CustomHealthCheck{APIVersion: apiVersion2, Kind: kind2,
				HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: current2}})
		}

		build, err := Compile(exprs)
		if err != nil {
			checkNamesCulprit(t, exprs, err)
			return
		}
		if build == nil {
			t.Fatal("Compile returned no readers and no error for a non-empty list")
		}

		// The object is of the first entry's group, as the reader reads
		// it (an apiVersion that is not group/version is the core group);
		// its kind is the entry's, or for an entry covering the whole
		// group, one the fuzzer picks.
		if kind != "" {
			objKind = kind
		} else if objKind == "" {
			objKind = "Gadget"
		}
		gvk := schema.FromAPIVersionAndKind(apiVersion, objKind)
		if gvk.Version == "" {
			gvk.Version = "v1"
		}
		gv := gvk.GroupVersion()
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gv.String(),
			"kind":       objKind,
			"metadata":   map[string]any{"name": "g", "namespace": "ns", "generation": generation},
		}}
		var st any
		if utiljson.Unmarshal(statusJSON, &st) == nil && st != nil {
			obj.Object["status"] = st
		}

		mapper := meta.NewDefaultRESTMapper(nil)
		mapper.Add(gvk, meta.RESTScopeNamespace)
		readers := build(mapper)
		if len(readers) != 1 {
			t.Fatalf("%d readers, want 1", len(readers))
		}
		r := readers[0]
		if !r.Supports(gvk.GroupKind()) {
			t.Fatalf("reader does not support %s, which %+v covers", gvk.GroupKind(), exprs[0])
		}

		decider := decidingEntry(exprs, gvk.GroupKind())
		read := func() (status.Status, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			start := time.Now()
			rs, err := r.ReadStatusForObject(ctx, nil, obj)
			if err != nil {
				// Only a runaway expression the context stopped may end
				// without a status: the wait then reports its timeout.
				if ctx.Err() == nil || !errors.Is(err, ctx.Err()) && !strings.Contains(err.Error(), "interrupted") {
					t.Fatalf("ReadStatusForObject: %v (after %s)", err, time.Since(start))
				}
				return "", "interrupted"
			}
			if rs == nil {
				t.Fatal("ReadStatusForObject returned neither status nor error")
			}
			switch rs.Status {
			case status.CurrentStatus, status.FailedStatus, status.InProgressStatus:
				if want := Explain(rs.Status, decider.HealthCheckExpressions); rs.Message != want {
					t.Fatalf("status %s with message %q, want %q (the entry for %s)", rs.Status, rs.Message, want, gvk.GroupKind())
				}
				if rs.Status == status.FailedStatus && decider.Failed == "" {
					t.Fatalf("Failed without a failed expression: %+v", decider)
				}
			case status.UnknownStatus:
				if rs.Error == nil || rs.Message != "healthCheckExprs: "+rs.Error.Error() {
					t.Fatalf("Unknown with error %v and message %q", rs.Error, rs.Message)
				}
			default:
				t.Fatalf("status %q is not one a CEL reader gives", rs.Status)
			}
			return rs.Status, rs.Message
		}
		s1, m1 := read()
		if stale(obj) && s1 != status.InProgressStatus && m1 != "interrupted" {
			t.Fatalf("stale observedGeneration read as %s: %s", s1, m1)
		}
		if s2, m2 := read(); m1 != "interrupted" && m2 != "interrupted" && (s1 != s2 || m1 != m2) {
			t.Fatalf("read %s (%s), then %s (%s)", s1, m1, s2, m2)
		}
	})
}

// checkNamesCulprit asserts that a Compile error names an entry and that
// the entry named is wrong: on its own, or as a repeat of an earlier one.
func checkNamesCulprit(t *testing.T, exprs []kustomize.CustomHealthCheck, err error) {
	t.Helper()
	m := entryIndex.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("Compile error names no entry: %v", err)
	}
	i, _ := strconv.Atoi(m[1])
	if i >= len(exprs) {
		t.Fatalf("Compile error names entry %d of %d: %v", i, len(exprs), err)
	}
	if _, alone := Compile(exprs[i : i+1]); alone != nil {
		return
	}
	if !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("entry %d compiles on its own, yet Compile blames it: %v", i, err)
	}
	gk := groupKindOf(exprs[i])
	for _, e := range exprs[:i] {
		if groupKindOf(e) == gk {
			return
		}
	}
	t.Fatalf("entry %d (%s) repeats no earlier entry, yet Compile calls it a duplicate: %v", i, gk, err)
}

// decidingEntry is the entry that judges objects of gk: the kind's own
// before its group's, as the CEL reader picks them.
func decidingEntry(exprs []kustomize.CustomHealthCheck, gk schema.GroupKind) kustomize.CustomHealthCheck {
	for _, want := range []schema.GroupKind{gk, {Group: gk.Group}} {
		for _, e := range exprs {
			if groupKindOf(e) == want {
				return e
			}
		}
	}
	panic(fmt.Sprintf("no entry covers %s", gk))
}

// stale is the built-in rule: an integer status.observedGeneration that
// differs from metadata.generation.
func stale(u *unstructured.Unstructured) bool {
	observed, ok, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if err != nil || !ok {
		return false
	}
	generation, ok, err := unstructured.NestedInt64(u.Object, "metadata", "generation")
	return err == nil && ok && observed != generation
}
