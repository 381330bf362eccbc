package sequencing

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// fuzzStatuses are the objects every successfully parsed fuzz input is
// evaluated against: the shapes real statuses have, and some they should not
// have but a controller or a user may still write.
var fuzzStatuses = []string{
	``,
	`null`,
	`{}`,
	`{"active": 1}`,
	`{"succeeded": 1, "failed": 0, "ready": true, "phase": "Complete", "ratio": 0.5}`,
	`{"failed": 3, "message": "a == b", "count": "12", "flag": "True"}`,
	`{"conditions": [{"type": "Ready", "status": "True", "reason": "a}b"}, {"type": "Progressing", "status": "False", "observedGeneration": 2}]}`,
	`{"conditions": [{"type": 1}, null, "x", [1, 2], {"status": {"nested": true}}]}`,
	`{"conditions": "not a list", "items": {"a": [[], {}, null]}, "n": -9223372036854775808, "big": 1e308}`,
	`"a string status"`,
	`[1, "two", {"three": 3}]`,
	`42`,
}

// FuzzParseReadiness fuzzes one expression, used in both annotations, and a
// raw value for the success annotation. What must hold:
//   - ParseReadiness never panics, and an error names the annotation at
//     fault;
//   - when the expression parses, evaluating it never panics and, as the
//     same expression is a success and a failure, the verdict is Failed
//     with that expression as the decision, or Pending; never Ready;
//   - evaluating again gives the same answer;
//   - a parsed raw success value evaluates without panic, and a failure
//     still wins over it.
func FuzzParseReadiness(f *testing.F) {
	seeds := []struct{ expression, rawSuccess string }{
		{"{.succeeded} == 1", `["{.succeeded} == 1", "{.succeeded} == 2"]`},
		{"{.failed} >= 1", `[ "{.failed} >= 1" ]`},
		{"{.succeeded}<=1", `["{.succeeded}>=1"]`},
		{`{.conditions[?(@.type=="Ready")].status} == True`, `["{.conditions[?(@.type==\"Ready\")].status} != 'False'"]`},
		{`{.conditions[?(@.reason=="a}b")].status} == "True"`, `["{.conditions[*].status} == True"]`},
		{"{.ready} == true", `["{.ready} != false"]`},
		{"{.ratio} > 0.25", `["{.n} < -1e3"]`},
		{"{.count} >= 12", `["{.count} == \"12\""]`},
		{"{.message} == 'a == b'", `["{.phase} == Complete"]`},
		{"{ .phase }\t!=\nPending", "\n[\n\"{.phase} != Pending\"\n]\n"},
		{"{@} != 0", `["{[0]} == 1"]`},
		{"{['succeeded','failed']} > 0", `["{..status} == True"]`},
		{"{.items.a[*][0]} == 1", `["{.conditions[-1:].type} == 1"]`},
		{"{.conditions[0:2:0].status} == x", `["{.conditions[5].status} == x"]`},
		// Broken ones.
		{"", `[]`},
		{"{.a} =", `null`},
		{"{.a == 1", `"{.a} == 1"`},
		{"{range .items[*]} == 1", `[1]`},
		{"{.items[?(@.a==end)]} == 1", `{}`},
		{"{.phase} < Running", `["{.a} === 1"]`},
		{"{.a} == null", `["{.a} > 1e999"]`},
		{"{.a[} == 1", `["{} == 1"]`},
		{`{"\}"} == '`, `["{.a} == 'x"]`},
		{"{[,]} == 1", `["{[?(@)]} == 1"]`},
		{"{.a'b}c'} != x", `["{.a\\}b} != x"]`},
	}
	for _, seed := range seeds {
		f.Add(seed.expression, seed.rawSuccess)
	}

	objects := make([]map[string]any, 0, len(fuzzStatuses)+1)
	for _, status := range fuzzStatuses {
		objects = append(objects, fuzzObject(f, status))
	}
	// Values a JSON decoder never produces, but a Go caller may.
	objects = append(objects, map[string]any{"status": map[string]any{
		"nan": math.NaN(), "inf": math.Inf(-1), "uint": uint64(math.MaxUint64), "ptr": new(1), "nil": (*int)(nil),
	}})

	f.Fuzz(func(t *testing.T, expression, rawSuccess string) {
		checkSameExpressionBothWays(t, expression, objects)
		checkRawSuccess(t, rawSuccess, objects)
	})
}

func fuzzObject(f *testing.F, status string) map[string]any {
	obj := map[string]any{"kind": "Job"}
	if status == "" {
		return obj
	}
	var decoded any
	if err := utiljson.Unmarshal([]byte(status), &decoded); err != nil {
		f.Fatalf("status %s: %v", status, err)
	}
	obj["status"] = decoded
	return obj
}

func checkSameExpressionBothWays(t *testing.T, expression string, objects []map[string]any) {
	list, err := json.Marshal([]string{expression})
	if err != nil {
		t.Fatalf("encoding %q: %v", expression, err)
	}
	r, warning, err := ParseReadiness(map[string]string{
		AnnotationReadinessSuccess: string(list),
		AnnotationReadinessFailure: string(list),
	})
	if warning != "" {
		t.Errorf("warning %q with both annotations set", warning)
	}
	if err != nil {
		if r != nil {
			t.Errorf("Readiness with error %v", err)
		}
		// The success annotation is parsed first and fails first.
		if !strings.Contains(err.Error(), "annotation "+AnnotationReadinessSuccess+": ") {
			t.Errorf("error %q does not name the success annotation", err)
		}
		return
	}
	// json.Marshal replaces invalid UTF-8, so the expression that decides is
	// the decoded one.
	var decoded []string
	if err := json.Unmarshal(list, &decoded); err != nil || len(decoded) != 1 {
		t.Fatalf("decoding %s: %v", list, err)
	}
	wantDecision := strings.TrimSpace(decoded[0])
	for _, obj := range objects {
		verdict, decision := r.Evaluate(obj)
		switch {
		case verdict == VerdictFailed && decision == wantDecision:
		case verdict == VerdictPending && decision == "":
		default:
			t.Errorf("Evaluate(%v) = %v, %q; want Failed, %q or Pending", obj["status"], verdict, decision, wantDecision)
		}
		if again, againDecision := r.Evaluate(obj); again != verdict || againDecision != decision {
			t.Errorf("Evaluate(%v) again = %v, %q; was %v, %q", obj["status"], again, againDecision, verdict, decision)
		}
	}
}

func checkRawSuccess(t *testing.T, rawSuccess string, objects []map[string]any) {
	const alwaysFails = "{.failed} != 12345"
	r, _, err := ParseReadiness(map[string]string{
		AnnotationReadinessSuccess: rawSuccess,
		AnnotationReadinessFailure: `["` + alwaysFails + `"]`,
	})
	if err != nil {
		if !strings.Contains(err.Error(), "annotation "+AnnotationReadinessSuccess+": ") {
			t.Errorf("error %q does not name the success annotation", err)
		}
		return
	}
	for _, obj := range objects {
		verdict, decision := r.Evaluate(obj)
		if verdict == VerdictReady && decision == "" {
			t.Errorf("Evaluate(%v) is Ready without a deciding expression", obj["status"])
		}
	}
	withFailure := map[string]any{"status": map[string]any{"failed": int64(1), "succeeded": int64(1)}}
	if verdict, decision := r.Evaluate(withFailure); verdict != VerdictFailed || decision != alwaysFails {
		t.Errorf("Evaluate with a true failure expression = %v, %q; want Failed, %q", verdict, decision, alwaysFails)
	}
}
