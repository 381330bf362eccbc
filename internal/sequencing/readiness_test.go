package sequencing

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// readinessAnnotations builds both annotations from their expression lists,
// JSON-encoded the way a chart author writes them.
func readinessAnnotations(t *testing.T, success, failure []string) map[string]string {
	t.Helper()
	return map[string]string{
		AnnotationReadinessSuccess: mustJSON(t, success),
		AnnotationReadinessFailure: mustJSON(t, failure),
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mustParseReadiness(t *testing.T, success, failure []string) *Readiness {
	t.Helper()
	r, warning, err := ParseReadiness(readinessAnnotations(t, success, failure))
	if err != nil {
		t.Fatalf("ParseReadiness: %v", err)
	}
	if warning != "" {
		t.Fatalf("unexpected warning %q", warning)
	}
	if r == nil {
		t.Fatal("ParseReadiness returned no Readiness for both annotations")
	}
	return r
}

// objectWithStatus decodes an object the way the API machinery does, so that
// integers are int64 and other numbers float64, as in an Unstructured.
func objectWithStatus(t *testing.T, statusJSON string) map[string]any {
	t.Helper()
	var status any
	if err := utiljson.Unmarshal([]byte(statusJSON), &status); err != nil {
		t.Fatalf("status %s: %v", statusJSON, err)
	}
	return map[string]any{
		"apiVersion": "batch/v1",
		"kind":       "Job",
		"metadata":   map[string]any{"name": "migrate", "generation": int64(1)},
		"status":     status,
	}
}

func TestParseReadinessExpression(t *testing.T) {
	integer := func(i int64) literal {
		return literal{kind: literalNumber, number: number{isInteger: true, integer: i}}
	}
	float := func(f float64) literal { return literal{kind: literalNumber, number: number{float: f}} }
	str := func(s string) literal { return literal{kind: literalString, text: s} }
	boolean := func(b bool) literal { return literal{kind: literalBool, boolean: b} }

	tests := []struct {
		expression   string
		wantSource   string
		wantOperator comparisonOperator
		wantValue    literal
	}{
		{expression: "{.succeeded} == 1", wantOperator: operatorEqual, wantValue: integer(1)},
		{expression: "{.succeeded} != 1", wantOperator: operatorNotEqual, wantValue: integer(1)},
		{expression: "{.succeeded} < 1", wantOperator: operatorLess, wantValue: integer(1)},
		{expression: "{.succeeded} <= 1", wantOperator: operatorLessEqual, wantValue: integer(1)},
		{expression: "{.succeeded} > 1", wantOperator: operatorGreater, wantValue: integer(1)},
		{expression: "{.succeeded} >= 1", wantOperator: operatorGreaterEqual, wantValue: integer(1)},
		// No whitespace at all: the two-character operators still win.
		{expression: "{.succeeded}<=1", wantOperator: operatorLessEqual, wantValue: integer(1)},
		{expression: "{.succeeded}>=1", wantOperator: operatorGreaterEqual, wantValue: integer(1)},
		{expression: "{.succeeded}!=-1", wantOperator: operatorNotEqual, wantValue: integer(-1)},
		// Any whitespace around and between the parts, and inside the braces.
		{expression: " \t{.succeeded}\n==\t 1 \n", wantSource: "{.succeeded}\n==\t 1", wantOperator: operatorEqual, wantValue: integer(1)},
		{expression: "{ .succeeded } == 1", wantOperator: operatorEqual, wantValue: integer(1)},
		{expression: "{\t.succeeded\n} == 1", wantOperator: operatorEqual, wantValue: integer(1)},
		// Numbers.
		{expression: "{.x} > -3", wantOperator: operatorGreater, wantValue: integer(-3)},
		{expression: "{.x} > 0.5", wantOperator: operatorGreater, wantValue: float(0.5)},
		{expression: "{.x} > -2.25", wantOperator: operatorGreater, wantValue: float(-2.25)},
		{expression: "{.x} > 1e3", wantOperator: operatorGreater, wantValue: float(1000)},
		{expression: "{.x} > 0", wantOperator: operatorGreater, wantValue: integer(0)},
		{expression: "{.x} < 9223372036854775807", wantOperator: operatorLess, wantValue: integer(math.MaxInt64)},
		{expression: "{.x} < 9223372036854775808", wantOperator: operatorLess, wantValue: float(9223372036854775808)},
		// Booleans.
		{expression: "{.ready} == true", wantOperator: operatorEqual, wantValue: boolean(true)},
		{expression: "{.ready} != false", wantOperator: operatorNotEqual, wantValue: boolean(false)},
		// Strings, quoted and bare.
		{expression: `{.phase} == "Complete"`, wantOperator: operatorEqual, wantValue: str("Complete")},
		{expression: `{.phase} == 'Complete'`, wantOperator: operatorEqual, wantValue: str("Complete")},
		{expression: `{.phase} == Complete`, wantOperator: operatorEqual, wantValue: str("Complete")},
		{expression: `{.message} == "two words"`, wantOperator: operatorEqual, wantValue: str("two words")},
		{expression: `{.message} == 'say "hi"'`, wantOperator: operatorEqual, wantValue: str(`say "hi"`)},
		{expression: `{.message} == "a == b"`, wantOperator: operatorEqual, wantValue: str("a == b")},
		{expression: `{.message} != ""`, wantOperator: operatorNotEqual, wantValue: str("")},
		{expression: `{.status} == True`, wantOperator: operatorEqual, wantValue: str("True")},
		{expression: `{.count} == "1"`, wantOperator: operatorEqual, wantValue: str("1")},
		{expression: `{.count} == +1`, wantOperator: operatorEqual, wantValue: str("+1")},
		{expression: `{.count} == NaN`, wantOperator: operatorEqual, wantValue: str("NaN")},
		{expression: `{.count} == 0x10`, wantOperator: operatorEqual, wantValue: str("0x10")},
		// The == and != inside a filter belong to the jsonpath.
		{
			expression:   `{.conditions[?(@.type=="Ready")].status} == True`,
			wantOperator: operatorEqual, wantValue: str("True"),
		},
		{
			expression:   `{.conditions[?(@.type!="Ready")].status}!=True`,
			wantOperator: operatorNotEqual, wantValue: str("True"),
		},
		{
			expression:   `{.conditions[?(@.reason=="a}b")].status} >= 2`,
			wantOperator: operatorGreaterEqual, wantValue: integer(2),
		},
		{expression: `{.a.b[0]['c']} == x`, wantOperator: operatorEqual, wantValue: str("x")},
		{expression: `{.items[*].ready} == true`, wantOperator: operatorEqual, wantValue: boolean(true)},
	}
	for _, tt := range tests {
		t.Run(tt.expression, func(t *testing.T) {
			e, err := parseReadinessExpression(tt.expression)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			wantSource := tt.wantSource
			if wantSource == "" {
				wantSource = tt.expression
			}
			if e.source != wantSource {
				t.Errorf("source = %q, want %q", e.source, wantSource)
			}
			if e.operator != tt.wantOperator {
				t.Errorf("operator = %q, want %q", e.operator, tt.wantOperator)
			}
			if e.value != tt.wantValue {
				t.Errorf("value = %+v, want %+v", e.value, tt.wantValue)
			}
			if e.path == nil {
				t.Error("jsonpath not compiled")
			}
		})
	}
}

func TestParseReadinessErrors(t *testing.T) {
	const validList = `["{.succeeded} == 1"]`
	tests := []struct {
		name  string
		value string
		// wantErr are substrings of the error, besides the annotation's name.
		wantErr []string
	}{
		{name: "not JSON", value: `{.succeeded} == 1`, wantErr: []string{"want a JSON list of strings"}},
		{name: "a JSON string, not a list", value: `"{.succeeded} == 1"`, wantErr: []string{"want a JSON list of strings"}},
		{name: "a list of numbers", value: `[1]`, wantErr: []string{"want a JSON list of strings"}},
		{name: "an object", value: `{"a": "b"}`, wantErr: []string{"want a JSON list of strings"}},
		{name: "trailing text", value: `["{.a} == 1"] x`, wantErr: []string{"want a JSON list of strings"}},
		{name: "empty value", value: ``, wantErr: []string{"want a JSON list of strings"}},
		{name: "empty list", value: `[]`, wantErr: []string{"list of expressions is empty"}},
		{name: "null", value: `null`, wantErr: []string{"list of expressions is empty"}},
		{name: "empty expression", value: `["{.a} == 1", "  "]`, wantErr: []string{`expression "  "`, "empty expression"}},
		{name: "no braces", value: `[".succeeded == 1"]`, wantErr: []string{`".succeeded == 1"`, "{jsonpath} in braces"}},
		{name: "text before the braces", value: `["x {.succeeded} == 1"]`, wantErr: []string{"{jsonpath} in braces"}},
		{name: "unbalanced braces", value: `["{.succeeded == 1"]`, wantErr: []string{`"{.succeeded == 1"`, "no matching }"}},
		{name: "unterminated quote in the path", value: `["{.conditions[?(@.type==\"Ready)].status} == True"]`, wantErr: []string{"unterminated \" quote in the jsonpath"}},
		{name: "no operator", value: `["{.succeeded}"]`, wantErr: []string{"missing comparison"}},
		{name: "no operator before the value", value: `["{.succeeded} 1"]`, wantErr: []string{`got "1"`}},
		{name: "single =", value: `["{.succeeded} = 1"]`, wantErr: []string{`got "= 1"`}},
		{name: "=< is not an operator", value: `["{.succeeded} =< 1"]`, wantErr: []string{`got "=< 1"`}},
		{name: "no value", value: `["{.succeeded} >= "]`, wantErr: []string{"missing value after >="}},
		{name: "===", value: `["{.succeeded} === 1"]`, wantErr: []string{`value "= 1" contains "="`}},
		{name: "<>", value: `["{.succeeded} <> 1"]`, wantErr: []string{`value "> 1" contains ">"`}},
		{name: "== then =", value: `["{.phase} ==Complete="]`, wantErr: []string{`"Complete=" contains "="`}},
		{name: "bare string with a space", value: `["{.phase} == Not Ready"]`, wantErr: []string{"contains whitespace: quote it"}},
		{name: "bare string with a quote", value: `["{.phase} == Ready\""]`, wantErr: []string{`contains "\""`}},
		{name: "unterminated quoted value", value: `["{.phase} == \"Ready"]`, wantErr: []string{"unterminated \" quote in value"}},
		{name: "text after the quoted value", value: `["{.phase} == 'Ready' x"]`, wantErr: []string{"unexpected text after the quoted value"}},
		{name: "quote inside the same quotes", value: `["{.phase} == 'it's'"]`, wantErr: []string{"unexpected text after the quoted value"}},
		{name: "null", value: `["{.phase} != null"]`, wantErr: []string{"cannot compare with null"}},
		{name: "number out of range", value: `["{.size} > 1e999"]`, wantErr: []string{"number 1e999 is out of range"}},
		{name: "ordering a bare string", value: `["{.phase} < Running"]`, wantErr: []string{`< needs a number, not the string "Running"`}},
		{name: "ordering a quoted number", value: `["{.count} >= \"1\""]`, wantErr: []string{`>= needs a number, not the string "1"`}},
		{name: "ordering booleans", value: `["{.ready} > false"]`, wantErr: []string{"> cannot order booleans"}},
		{name: "empty jsonpath", value: `["{} == 1"]`, wantErr: []string{"empty jsonpath"}},
		{name: "blank jsonpath", value: `["{ \t} == 1"]`, wantErr: []string{"empty jsonpath"}},
		{name: "invalid jsonpath", value: `["{.a[} == 1"]`, wantErr: []string{"jsonpath {.a[}", "unterminated array"}},
		{name: "invalid character in jsonpath", value: `["{.a %} == 1"]`, wantErr: []string{"jsonpath {.a %}", "unrecognized character"}},
		{
			// The jsonpath parser ends the path at the first }, taking the
			// quote for part of the field name, and reads the rest as
			// constant text, which would compare as a value of its own.
			name: "path ending before its closing brace", value: `["{.a'b}c'} != x"]`,
			wantErr: []string{"want a single {…} path"},
		},
		{name: "range", value: `["{range .items[*]} == 1"]`, wantErr: []string{`"range" is not supported`}},
		{name: "identifier in a filter", value: `["{.items[?(@.a==end)]} == 1"]`, wantErr: []string{`"end" is not supported`}},
		{name: "second expression broken", value: `["{.a} == 1", "{.b} =! 2"]`, wantErr: []string{`expression "{.b} =! 2"`}},
	}
	for _, tt := range tests {
		for _, annotation := range []string{AnnotationReadinessSuccess, AnnotationReadinessFailure} {
			t.Run(tt.name+"/"+annotation, func(t *testing.T) {
				annotations := map[string]string{
					AnnotationReadinessSuccess: validList,
					AnnotationReadinessFailure: validList,
				}
				annotations[annotation] = tt.value
				r, warning, err := ParseReadiness(annotations)
				if err == nil {
					t.Fatalf("no error, Readiness %+v", r)
				}
				if r != nil || warning != "" {
					t.Errorf("with the error, got Readiness %+v and warning %q", r, warning)
				}
				for _, want := range append([]string{"annotation " + annotation + ":"}, tt.wantErr...) {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
			})
		}
	}
}

func TestParseReadinessAnnotationsPresent(t *testing.T) {
	const valid = `["{.succeeded} == 1"]`
	tests := []struct {
		name        string
		annotations map[string]string
		wantCustom  bool
		wantWarning []string
	}{
		{name: "no annotations", annotations: nil},
		{name: "unrelated annotations", annotations: map[string]string{"helm.sh/hook": "pre-install"}},
		{
			name:        "both",
			annotations: map[string]string{AnnotationReadinessSuccess: valid, AnnotationReadinessFailure: `[ "{.failed} >= 1" ]`},
			wantCustom:  true,
		},
		{
			name:        "JSON whitespace",
			annotations: map[string]string{AnnotationReadinessSuccess: "\n [\n  \"{.succeeded} == 1\" ,\n  \"{.succeeded} == 2\"\n ]\n", AnnotationReadinessFailure: valid},
			wantCustom:  true,
		},
		{
			name:        "success only",
			annotations: map[string]string{AnnotationReadinessSuccess: valid},
			wantWarning: []string{"annotation helm.sh/readiness-success is set but helm.sh/readiness-failure is missing", "default readiness applies"},
		},
		{
			name:        "failure only",
			annotations: map[string]string{AnnotationReadinessFailure: valid},
			wantWarning: []string{"annotation helm.sh/readiness-failure is set but helm.sh/readiness-success is missing", "default readiness applies"},
		},
		{
			// The lone annotation has no effect, so it is not parsed: a chart
			// Helm installs with a warning does not fail here.
			name:        "broken success only",
			annotations: map[string]string{AnnotationReadinessSuccess: "not json"},
			wantWarning: []string{"helm.sh/readiness-failure is missing"},
		},
		{
			name:        "empty failure only",
			annotations: map[string]string{AnnotationReadinessFailure: ""},
			wantWarning: []string{"helm.sh/readiness-success is missing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, warning, err := ParseReadiness(tt.annotations)
			if err != nil {
				t.Fatalf("ParseReadiness: %v", err)
			}
			if (r != nil) != tt.wantCustom {
				t.Errorf("custom readiness = %v, want %v", r != nil, tt.wantCustom)
			}
			if len(tt.wantWarning) == 0 && warning != "" {
				t.Errorf("unexpected warning %q", warning)
			}
			for _, want := range tt.wantWarning {
				if !strings.Contains(warning, want) {
					t.Errorf("warning %q does not contain %q", warning, want)
				}
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	job := struct{ success, failure []string }{
		success: []string{"{.succeeded} == 1"},
		failure: []string{"{.failed} >= 1"},
	}
	deployment := struct{ success, failure []string }{
		success: []string{`{.conditions[?(@.type=="Available")].status} == True`},
		failure: []string{`{.conditions[?(@.type=="Progressing")].reason} == ProgressDeadlineExceeded`},
	}
	never := []string{"{.never} == 1"}

	tests := []struct {
		name         string
		success      []string
		failure      []string
		status       string // JSON; empty for an object without status
		wantVerdict  Verdict
		wantDecision string
	}{
		// A Job's counters.
		{name: "job without status", success: job.success, failure: job.failure, wantVerdict: VerdictPending},
		{name: "job with null status", success: job.success, failure: job.failure, status: `null`, wantVerdict: VerdictPending},
		{name: "job with empty status", success: job.success, failure: job.failure, status: `{}`, wantVerdict: VerdictPending},
		{name: "job running", success: job.success, failure: job.failure, status: `{"active": 1}`, wantVerdict: VerdictPending},
		{name: "job succeeded", success: job.success, failure: job.failure, status: `{"succeeded": 1}`, wantVerdict: VerdictReady, wantDecision: "{.succeeded} == 1"},
		{name: "job failed", success: job.success, failure: job.failure, status: `{"failed": 2}`, wantVerdict: VerdictFailed, wantDecision: "{.failed} >= 1"},
		{name: "job failed zero times", success: job.success, failure: job.failure, status: `{"failed": 0, "active": 1}`, wantVerdict: VerdictPending},
		{name: "failure wins over success", success: job.success, failure: job.failure, status: `{"succeeded": 1, "failed": 1}`, wantVerdict: VerdictFailed, wantDecision: "{.failed} >= 1"},
		{
			name:    "any success expression",
			success: []string{"{.succeeded} == 1", " {.succeeded} == 2 "}, failure: job.failure,
			status: `{"succeeded": 2}`, wantVerdict: VerdictReady, wantDecision: "{.succeeded} == 2",
		},
		{
			name:    "any failure expression",
			success: job.success, failure: []string{"{.failed} >= 1", `{.phase} == "Broken"`},
			status: `{"succeeded": 1, "phase": "Broken"}`, wantVerdict: VerdictFailed, wantDecision: `{.phase} == "Broken"`,
		},

		// A Deployment's conditions, picked by filter.
		{
			name: "deployment available", success: deployment.success, failure: deployment.failure,
			status:      `{"conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}, {"type": "Available", "status": "True"}]}`,
			wantVerdict: VerdictReady, wantDecision: deployment.success[0],
		},
		{
			name: "deployment unavailable", success: deployment.success, failure: deployment.failure,
			status:      `{"conditions": [{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}, {"type": "Available", "status": "False"}]}`,
			wantVerdict: VerdictPending,
		},
		{
			name: "deployment past its deadline", success: deployment.success, failure: deployment.failure,
			status:      `{"conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}, {"type": "Available", "status": "True"}]}`,
			wantVerdict: VerdictFailed, wantDecision: deployment.failure[0],
		},
		{
			name: "deployment without conditions", success: deployment.success, failure: deployment.failure,
			status: `{"replicas": 1}`, wantVerdict: VerdictPending,
		},
		{
			name: "conditions is not a list", success: deployment.success, failure: deployment.failure,
			status: `{"conditions": "Available"}`, wantVerdict: VerdictPending,
		},
		{
			name: "condition without the filtered field", success: deployment.success, failure: deployment.failure,
			status: `{"conditions": [{"status": "True"}]}`, wantVerdict: VerdictPending,
		},
		{
			name:    "index beyond the list",
			success: []string{"{.conditions[0].status} == True"}, failure: never,
			status: `{"conditions": []}`, wantVerdict: VerdictPending,
		},

		// Several values: any of them satisfying the comparison is enough.
		{
			name:    "several values, one equal",
			success: []string{"{.conditions[*].status} == False"}, failure: never,
			status: `{"conditions": [{"status": "True"}, {"status": "False"}]}`, wantVerdict: VerdictReady, wantDecision: "{.conditions[*].status} == False",
		},
		{
			name:    "several values, none equal",
			success: []string{"{.conditions[*].status} == False"}, failure: never,
			status: `{"conditions": [{"status": "True"}, {"status": "True"}]}`, wantVerdict: VerdictPending,
		},
		{
			name:    "several values, one different",
			success: []string{"{.conditions[*].status} != True"}, failure: never,
			status: `{"conditions": [{"status": "True"}, {"status": "Unknown"}]}`, wantVerdict: VerdictReady, wantDecision: "{.conditions[*].status} != True",
		},
		{
			name:    "union with a missing field",
			success: []string{"{['missing','available']} >= 3"}, failure: never,
			status: `{"available": 3}`, wantVerdict: VerdictReady, wantDecision: "{['missing','available']} >= 3",
		},
		{
			name:    "union of fields",
			success: []string{"{['ready','available']} >= 3"}, failure: never,
			status: `{"ready": 1, "available": 3}`, wantVerdict: VerdictReady, wantDecision: "{['ready','available']} >= 3",
		},

		// Numbers.
		{name: "int equals float", success: []string{"{.n} == 1.0"}, failure: never, status: `{"n": 1}`, wantVerdict: VerdictReady, wantDecision: "{.n} == 1.0"},
		{name: "float above", success: []string{"{.ratio} > 0.5"}, failure: never, status: `{"ratio": 0.75}`, wantVerdict: VerdictReady, wantDecision: "{.ratio} > 0.5"},
		{name: "float below", success: []string{"{.ratio} > 0.5"}, failure: never, status: `{"ratio": 0.25}`, wantVerdict: VerdictPending},
		{name: "negative", success: []string{"{.n} < -1"}, failure: never, status: `{"n": -2}`, wantVerdict: VerdictReady, wantDecision: "{.n} < -1"},
		{name: "less or equal, equal", success: []string{"{.n} <= 3"}, failure: never, status: `{"n": 3}`, wantVerdict: VerdictReady, wantDecision: "{.n} <= 3"},
		{name: "less or equal, greater", success: []string{"{.n} <= 3"}, failure: never, status: `{"n": 4}`, wantVerdict: VerdictPending},
		{name: "greater, equal", success: []string{"{.n} > 3"}, failure: never, status: `{"n": 3}`, wantVerdict: VerdictPending},
		{name: "less, equal", success: []string{"{.n} < 3"}, failure: never, status: `{"n": 3}`, wantVerdict: VerdictPending},
		{name: "not equal, equal", success: []string{"{.n} != 3"}, failure: never, status: `{"n": 3}`, wantVerdict: VerdictPending},
		{name: "not equal, different", success: []string{"{.n} != 3"}, failure: never, status: `{"n": 4}`, wantVerdict: VerdictReady, wantDecision: "{.n} != 3"},
		{
			// As float64 both would be 2^63 and equal.
			name:    "large integers compare exactly",
			success: []string{"{.n} > 9223372036854775806"}, failure: never,
			status: `{"n": 9223372036854775807}`, wantVerdict: VerdictReady, wantDecision: "{.n} > 9223372036854775806",
		},
		{name: "numeric string", success: []string{"{.replicas} >= 3"}, failure: never, status: `{"replicas": "3"}`, wantVerdict: VerdictReady, wantDecision: "{.replicas} >= 3"},
		{name: "numeric string below", success: []string{"{.replicas} >= 3"}, failure: never, status: `{"replicas": "2.5"}`, wantVerdict: VerdictPending},
		{name: "non-numeric string is not ordered", success: []string{"{.replicas} < 3"}, failure: never, status: `{"replicas": "few"}`, wantVerdict: VerdictPending},
		{name: "non-numeric string differs", success: []string{"{.replicas} != 3"}, failure: never, status: `{"replicas": "few"}`, wantVerdict: VerdictReady, wantDecision: "{.replicas} != 3"},
		{name: "NaN string is not a number", success: []string{"{.n} < 3"}, failure: never, status: `{"n": "NaN"}`, wantVerdict: VerdictPending},
		{name: "boolean is not a number", success: []string{"{.n} == 1"}, failure: never, status: `{"n": true}`, wantVerdict: VerdictPending},

		// Booleans.
		{name: "boolean true", success: []string{"{.ready} == true"}, failure: never, status: `{"ready": true}`, wantVerdict: VerdictReady, wantDecision: "{.ready} == true"},
		{name: "boolean false", success: []string{"{.ready} == true"}, failure: never, status: `{"ready": false}`, wantVerdict: VerdictPending},
		{name: "boolean not equal", success: []string{"{.ready} != false"}, failure: never, status: `{"ready": true}`, wantVerdict: VerdictReady, wantDecision: "{.ready} != false"},
		{name: "condition status True is true", success: []string{"{.ready} == true"}, failure: never, status: `{"ready": "True"}`, wantVerdict: VerdictReady, wantDecision: "{.ready} == true"},
		{name: "string false is not true", success: []string{"{.ready} == true"}, failure: never, status: `{"ready": "false"}`, wantVerdict: VerdictPending},
		{name: "other string is not true", success: []string{"{.ready} == true"}, failure: never, status: `{"ready": "yes"}`, wantVerdict: VerdictPending},
		{name: "number is not true", success: []string{"{.ready} == true"}, failure: never, status: `{"ready": 1}`, wantVerdict: VerdictPending},

		// Strings.
		{name: "bare string", success: []string{"{.phase} == Complete"}, failure: never, status: `{"phase": "Complete"}`, wantVerdict: VerdictReady, wantDecision: "{.phase} == Complete"},
		{name: "case matters", success: []string{"{.phase} == complete"}, failure: never, status: `{"phase": "Complete"}`, wantVerdict: VerdictPending},
		{name: "quoted string with spaces", success: []string{`{.message} == 'all done'`}, failure: never, status: `{"message": "all done"}`, wantVerdict: VerdictReady, wantDecision: `{.message} == 'all done'`},
		{name: "string differs", success: []string{`{.phase} != "Pending"`}, failure: never, status: `{"phase": "Running"}`, wantVerdict: VerdictReady, wantDecision: `{.phase} != "Pending"`},
		{name: "quoted number matches a string", success: []string{`{.count} == "1"`}, failure: never, status: `{"count": "1"}`, wantVerdict: VerdictReady, wantDecision: `{.count} == "1"`},
		{name: "quoted number is not a number", success: []string{`{.count} == "1"`}, failure: never, status: `{"count": 1}`, wantVerdict: VerdictPending},
		{name: "empty string", success: []string{`{.message} == ""`}, failure: never, status: `{"message": ""}`, wantVerdict: VerdictReady, wantDecision: `{.message} == ""`},

		// Missing, null, objects and lists: false whatever the operator.
		{name: "missing field, not equal", success: []string{"{.failed} != 0"}, failure: never, status: `{"active": 1}`, wantVerdict: VerdictPending},
		{name: "null field, not equal", success: []string{"{.failed} != 0"}, failure: never, status: `{"failed": null}`, wantVerdict: VerdictPending},
		{name: "object, not equal", success: []string{"{.failed} != 0"}, failure: never, status: `{"failed": {"count": 1}}`, wantVerdict: VerdictPending},
		{name: "list, not equal", success: []string{"{.failed} != 0"}, failure: never, status: `{"failed": [1]}`, wantVerdict: VerdictPending},
		{name: "whole status, not equal", success: []string{"{@} != 0"}, failure: never, status: `{"failed": 1}`, wantVerdict: VerdictPending},
		{name: "status is a string", success: job.success, failure: job.failure, status: `"done"`, wantVerdict: VerdictPending},
		{name: "status is a list", success: []string{"{[0]} == 1"}, failure: never, status: `[1]`, wantVerdict: VerdictReady, wantDecision: "{[0]} == 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParseReadiness(t, tt.success, tt.failure)
			obj := map[string]any{"kind": "Job"}
			if tt.status != "" {
				obj = objectWithStatus(t, tt.status)
			}
			verdict, decision := r.Evaluate(obj)
			if verdict != tt.wantVerdict || decision != tt.wantDecision {
				t.Errorf("Evaluate = %v, %q; want %v, %q", verdict, decision, tt.wantVerdict, tt.wantDecision)
			}
		})
	}
}

// TestEvaluateGoTypes covers status values built in Go rather than decoded
// from JSON, as a caller or a typed conversion may hand over.
func TestEvaluateGoTypes(t *testing.T) {
	tests := []struct {
		name      string
		success   string
		value     any
		wantReady bool
	}{
		{name: "int", success: "{.v} == 3", value: 3, wantReady: true},
		{name: "int32", success: "{.v} > 2", value: int32(3), wantReady: true},
		{name: "uint8", success: "{.v} < 2", value: uint8(3), wantReady: false},
		{name: "uint64 beyond int64", success: "{.v} > 9223372036854775807", value: uint64(math.MaxUint64), wantReady: true},
		{name: "float32", success: "{.v} == 0.5", value: float32(0.5), wantReady: true},
		{name: "NaN is not equal", success: "{.v} == 1", value: math.NaN(), wantReady: false},
		{name: "NaN is not ordered", success: "{.v} < 1", value: math.NaN(), wantReady: false},
		{name: "NaN differs", success: "{.v} != 1", value: math.NaN(), wantReady: true},
		{name: "infinity", success: "{.v} > 1e300", value: math.Inf(1), wantReady: true},
		{name: "json.Number", success: "{.v} >= 10", value: json.Number("10"), wantReady: true},
		{name: "pointer to int", success: "{.v} == 3", value: new(3), wantReady: true},
		{name: "nil pointer", success: "{.v} != 3", value: (*int)(nil), wantReady: false},
		{name: "typed string", success: "{.v} == Ready", value: phase("Ready"), wantReady: true},
		{name: "complex", success: "{.v} != 1", value: complex(1, 1), wantReady: false},
		{name: "typed map", success: "{.v.a} == 1", value: map[string]int{"a": 1}, wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParseReadiness(t, []string{tt.success}, []string{"{.never} == 1"})
			verdict, _ := r.Evaluate(map[string]any{"status": map[string]any{"v": tt.value}})
			if got := verdict == VerdictReady; got != tt.wantReady {
				t.Errorf("Evaluate = %v, want ready %v", verdict, tt.wantReady)
			}
		})
	}
}

type phase string

func TestEvaluateNilReadiness(t *testing.T) {
	var r *Readiness
	verdict, decision := r.Evaluate(objectWithStatus(t, `{"succeeded": 1}`))
	if verdict != VerdictPending || decision != "" {
		t.Errorf("Evaluate = %v, %q; want Pending", verdict, decision)
	}
}

// TestEvaluateConcurrently shares one Readiness between goroutines, as the
// waits of several resources of one kind do; run with -race.
func TestEvaluateConcurrently(t *testing.T) {
	r := mustParseReadiness(t,
		[]string{`{.conditions[?(@.type=="Complete")].status} == True`},
		[]string{`{.conditions[?(@.type=="Failed")].status} == True`, "{.failed} >= 1"})
	objects := []struct {
		obj  map[string]any
		want Verdict
	}{
		{obj: objectWithStatus(t, `{"conditions": [{"type": "Complete", "status": "True"}]}`), want: VerdictReady},
		{obj: objectWithStatus(t, `{"conditions": [{"type": "Failed", "status": "True"}]}`), want: VerdictFailed},
		{obj: objectWithStatus(t, `{"failed": 3}`), want: VerdictFailed},
		{obj: objectWithStatus(t, `{"active": 1}`), want: VerdictPending},
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				object := objects[(g+i)%len(objects)]
				if got, _ := r.Evaluate(object.obj); got != object.want {
					t.Errorf("Evaluate = %v, want %v", got, object.want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestVerdictString(t *testing.T) {
	for verdict, want := range map[Verdict]string{
		VerdictPending: "Pending",
		VerdictReady:   "Ready",
		VerdictFailed:  "Failed",
		Verdict(7):     "Verdict(7)",
	} {
		if got := verdict.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(verdict), got, want)
		}
	}
}
