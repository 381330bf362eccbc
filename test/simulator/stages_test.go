package simulator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// stageDoc is the part of kwok's Stage schema these stages use. Decoding
// strictly into it catches misspelt fields, which kwok would silently ignore.
type stageDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		ResourceRef struct {
			APIGroup string `json:"apiGroup"`
			Kind     string `json:"kind"`
		} `json:"resourceRef"`
		Selector struct {
			MatchExpressions []struct {
				Key      string   `json:"key"`
				Operator string   `json:"operator"`
				Values   []string `json:"values"`
			} `json:"matchExpressions"`
		} `json:"selector"`
		Delay *struct {
			DurationMilliseconds       *int64 `json:"durationMilliseconds"`
			JitterDurationMilliseconds *int64 `json:"jitterDurationMilliseconds"`
		} `json:"delay"`
		Next struct {
			Delete  bool `json:"delete"`
			Patches []struct {
				Subresource string `json:"subresource"`
				Root        string `json:"root"`
				Template    string `json:"template"`
			} `json:"patches"`
		} `json:"next"`
	} `json:"spec"`
}

func loadStages(t *testing.T) map[string]stageDoc {
	t.Helper()
	data, err := KwokStages()
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	stages := map[string]stageDoc{}
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading stages: %v", err)
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatalf("stage document is not YAML: %v\n%s", err, doc)
		}
		if len(probe) == 0 {
			continue // only comments
		}
		var s stageDoc
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			t.Fatalf("decoding stage: %v\n%s", err, doc)
		}
		if s.APIVersion != "kwok.x-k8s.io/v1alpha1" || s.Kind != "Stage" {
			t.Fatalf("unexpected document %s/%s", s.APIVersion, s.Kind)
		}
		if _, dup := stages[s.Metadata.Name]; dup {
			t.Fatalf("duplicate stage %s", s.Metadata.Name)
		}
		stages[s.Metadata.Name] = s
	}
	return stages
}

func TestStagesCoverEveryGate(t *testing.T) {
	stages := loadStages(t)
	gateKey := fmt.Sprintf(".metadata.annotations[%q]", GateAnnotation)
	byGate := map[string][]string{}
	var kinds []string
	for name, s := range stages {
		kinds = append(kinds, s.Spec.ResourceRef.Kind)
		for _, e := range s.Spec.Selector.MatchExpressions {
			if e.Key != gateKey {
				continue
			}
			if e.Operator != "In" || len(e.Values) != 1 {
				t.Errorf("stage %s: gate selector must be In with one value, got %s %v", name, e.Operator, e.Values)
			}
			for _, v := range e.Values {
				byGate[v] = append(byGate[v], name)
			}
		}
	}
	for _, gate := range []string{GateBlocked, GateStarted, GateReady, GateComplete, GateFail, GateCrashLoop} {
		if len(byGate[gate]) != 1 {
			t.Errorf("gate %q is selected by stages %v, want exactly one", gate, byGate[gate])
		}
	}
	if len(byGate) != 6 {
		t.Errorf("stages select unknown gates: %v", byGate)
	}
	for _, want := range []string{"sim-node-initialize", "sim-node-heartbeat", "sim-pod-delete"} {
		if _, ok := stages[want]; !ok {
			t.Errorf("stage %s missing", want)
		}
	}
	if !stages["sim-pod-delete"].Spec.Next.Delete {
		t.Error("sim-pod-delete does not delete")
	}
	if !strings.Contains(strings.Join(kinds, ","), "Node") {
		t.Error("no node stages: kwok would never make its nodes ready")
	}
}

// renderer mimics kwok's: the object goes through JSON (numbers kept as
// json.Number), the template is executed with sprig and kwok's helpers, and
// the YAML output becomes the JSON patch body.
type renderer struct {
	now    time.Time
	nodeIP string
	nextIP int
}

func (r *renderer) funcs() template.FuncMap {
	funcs := sprig.TxtFuncMap()
	for name, fn := range map[string]any{
		"Quote": func(v any) string {
			data, err := json.Marshal(v)
			if err != nil || len(data) == 0 || data[0] != '"' {
				return fmt.Sprintf("%q", string(data))
			}
			return string(data)
		},
		"Now":        func() string { return r.now.Format(time.RFC3339Nano) },
		"Version":    func() string { return "v0.7.0" },
		"NodeIP":     func() string { return r.nodeIP },
		"NodePort":   func() int { return 10250 },
		"NodeIPWith": func(string) string { return "10.0.0.1" },
		"YAML": func(v any, indent ...int) (string, error) {
			data, err := yaml.Marshal(v)
			if err != nil {
				return "", err
			}
			if len(indent) != 1 || indent[0] <= 0 {
				return string(data), nil
			}
			pad := strings.Repeat("  ", indent[0])
			return strings.ReplaceAll("\n"+string(data), "\n", "\n"+pad), nil
		},
		"PodIPWith": func(_ string, _ bool, _, _, _ string) string {
			r.nextIP++
			return fmt.Sprintf("10.244.0.%d", r.nextIP)
		},
	} {
		funcs[name] = fn
	}
	return funcs
}

func (r *renderer) render(t *testing.T, s stageDoc, obj any) []byte {
	t.Helper()
	if len(s.Spec.Next.Patches) != 1 {
		t.Fatalf("stage %s: want one patch, got %d", s.Metadata.Name, len(s.Spec.Next.Patches))
	}
	p := s.Spec.Next.Patches[0]
	if p.Subresource != "status" || p.Root != "status" {
		t.Fatalf("stage %s: patch must target the status subresource", s.Metadata.Name)
	}
	tpl, err := template.New(s.Metadata.Name).Funcs(r.funcs()).Parse(strings.TrimSpace(p.Template))
	if err != nil {
		t.Fatalf("stage %s: parsing template: %v", s.Metadata.Name, err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, data); err != nil {
		t.Fatalf("stage %s: executing template: %v", s.Metadata.Name, err)
	}
	status, err := yaml.YAMLToJSON(out.Bytes())
	if err != nil {
		t.Fatalf("stage %s: output is not YAML: %v\n%s", s.Metadata.Name, err, out.String())
	}
	return []byte(fmt.Sprintf(`{"status":%s}`, status))
}

// play applies a stage the way kwok and the API server do: a strategic merge
// patch of the rendered status, decoded strictly into the typed object.
func play[T any](t *testing.T, r *renderer, s stageDoc, obj *T) *T {
	t.Helper()
	patch := r.render(t, s, obj)
	original, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patch, new(T))
	if err != nil {
		t.Fatalf("stage %s: applying patch: %v\n%s", s.Metadata.Name, err, patch)
	}
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	out := new(T)
	if err := dec.Decode(out); err != nil {
		t.Fatalf("stage %s: result does not decode: %v\n%s", s.Metadata.Name, err, merged)
	}
	return out
}

func stagePod(gate string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "ns", UID: "uid-1",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
			Annotations:       map[string]string{GateAnnotation: gate},
		},
		Spec: corev1.PodSpec{
			NodeName: "kwok-node-0",
			InitContainers: []corev1.Container{
				{Name: "migrate", Image: "migrate:1"},
				{Name: "proxy", Image: "proxy:1", RestartPolicy: ptrTo(corev1.ContainerRestartPolicyAlways)},
			},
			Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "metrics", Image: "metrics:1"}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		},
	}
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) corev1.PodCondition {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.PodCondition{}
}

func TestBlockedThenReady(t *testing.T) {
	stages := loadStages(t)
	r := &renderer{now: time.Now()}
	pod := stagePod(GateBlocked)
	pod.Annotations[WaitingReasonAnnotation] = ReasonConfigError
	pod.Annotations[WaitingMessageAnnotation] = `secret "db" not found`

	blocked := play(t, r, stages["sim-pod-blocked"], pod)
	if blocked.Status.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Pending", blocked.Status.Phase)
	}
	for _, cs := range blocked.Status.ContainerStatuses {
		w := cs.State.Waiting
		if w == nil || w.Reason != ReasonConfigError || w.Message != `secret "db" not found` {
			t.Errorf("container %s state = %+v, want waiting with the simulator's reason", cs.Name, cs.State)
		}
	}
	if c := condition(blocked, corev1.PodReady); c.Status != corev1.ConditionFalse || c.Message != `secret "db" not found` {
		t.Errorf("Ready condition = %+v", c)
	}
	if c := condition(blocked, corev1.PodScheduled); c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled condition lost: %+v", blocked.Status.Conditions)
	}

	// kwok skips patches that change nothing; the blocked stage must be one
	// of them, or kwok would rewrite the pod forever.
	r.now = r.now.Add(time.Minute)
	if again := play(t, r, stages["sim-pod-blocked"], blocked); !reflect.DeepEqual(again, blocked) {
		t.Errorf("blocked stage is not idempotent:\nfirst  %+v\nsecond %+v", blocked.Status, again.Status)
	}

	blocked.Annotations[GateAnnotation] = GateReady
	ready := play(t, r, stages["sim-pod-ready"], blocked)
	if ready.Status.Phase != corev1.PodRunning || ready.Status.PodIP == "" || ready.Status.StartTime == nil {
		t.Errorf("status = %+v, want Running with an IP and a start time", ready.Status)
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized} {
		c := condition(ready, typ)
		if c.Status != corev1.ConditionTrue || c.Reason != "" || c.Message != "" {
			t.Errorf("%s condition = %+v, want True without the old reason", typ, c)
		}
	}
	for _, cs := range ready.Status.ContainerStatuses {
		if !cs.Ready || cs.State.Running == nil || cs.State.Waiting != nil {
			t.Errorf("container %s = %+v, want ready and only running", cs.Name, cs)
		}
	}
	init := ready.Status.InitContainerStatuses
	if len(init) != 2 || init[0].State.Terminated == nil || init[1].State.Running == nil {
		t.Errorf("init containers = %+v, want migrate terminated and the sidecar running", init)
	}
}

func TestStartedThenReadyKeepsIPAndStartTime(t *testing.T) {
	stages := loadStages(t)
	r := &renderer{now: time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)}
	started := play(t, r, stages["sim-pod-started"], stagePod(GateStarted))
	if started.Status.Phase != corev1.PodRunning || condition(started, corev1.PodReady).Status != corev1.ConditionFalse {
		t.Fatalf("started pod = %+v, want running and not ready", started.Status)
	}
	for _, cs := range started.Status.ContainerStatuses {
		if cs.Ready || cs.State.Running == nil {
			t.Errorf("container %s = %+v, want running, not ready", cs.Name, cs)
		}
	}

	r.now = r.now.Add(time.Minute)
	started.Annotations[GateAnnotation] = GateReady
	ready := play(t, r, stages["sim-pod-ready"], started)
	if ready.Status.PodIP != started.Status.PodIP {
		t.Errorf("pod IP changed from %s to %s", started.Status.PodIP, ready.Status.PodIP)
	}
	if !ready.Status.StartTime.Equal(started.Status.StartTime) {
		t.Errorf("start time changed from %v to %v", started.Status.StartTime, ready.Status.StartTime)
	}
	if condition(ready, corev1.PodReady).Status != corev1.ConditionTrue {
		t.Errorf("not ready: %+v", ready.Status.Conditions)
	}
}

func TestTerminalStages(t *testing.T) {
	stages := loadStages(t)
	tests := []struct {
		stage     string
		gate      string
		wantPhase corev1.PodPhase
		wantExit  int32
	}{
		{"sim-pod-complete", GateComplete, corev1.PodSucceeded, 0},
		{"sim-pod-fail", GateFail, corev1.PodFailed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.stage, func(t *testing.T) {
			r := &renderer{now: time.Now()}
			// Straight from pending, and from a started pod.
			for _, from := range []*corev1.Pod{
				stagePod(tt.gate),
				play(t, r, stages["sim-pod-started"], stagePod(GateStarted)),
			} {
				from.Annotations[GateAnnotation] = tt.gate
				done := play(t, r, stages[tt.stage], from)
				if done.Status.Phase != tt.wantPhase {
					t.Errorf("phase = %s, want %s", done.Status.Phase, tt.wantPhase)
				}
				if condition(done, corev1.PodReady).Status != corev1.ConditionFalse {
					t.Errorf("terminal pod is ready: %+v", done.Status.Conditions)
				}
				for _, cs := range append(done.Status.ContainerStatuses, done.Status.InitContainerStatuses...) {
					if cs.State.Terminated == nil || cs.State.Running != nil || cs.State.Waiting != nil {
						t.Errorf("container %s state = %+v, want only terminated", cs.Name, cs.State)
						continue
					}
				}
				for _, cs := range done.Status.ContainerStatuses {
					if cs.State.Terminated != nil && cs.State.Terminated.ExitCode != tt.wantExit {
						t.Errorf("container %s exit code = %d, want %d", cs.Name, cs.State.Terminated.ExitCode, tt.wantExit)
					}
				}
			}
		})
	}
}

func TestCrashLoopCountsRestarts(t *testing.T) {
	stages := loadStages(t)
	r := &renderer{now: time.Now()}
	pod := stagePod(GateCrashLoop)
	var firstIP string
	for i := 1; i <= 3; i++ {
		r.now = r.now.Add(2 * time.Second)
		pod = play(t, r, stages["sim-pod-crashloop"], pod)
		if i == 1 {
			firstIP = pod.Status.PodIP
		}
		if pod.Status.Phase != corev1.PodRunning || condition(pod, corev1.PodReady).Status != corev1.ConditionFalse {
			t.Fatalf("round %d: status = %+v, want running and not ready", i, pod.Status)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.RestartCount != int32(i) {
				t.Errorf("round %d: container %s restartCount = %d", i, cs.Name, cs.RestartCount)
			}
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.State.Running != nil {
				t.Errorf("round %d: container %s state = %+v", i, cs.Name, cs.State)
			}
			if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
				t.Errorf("round %d: container %s last state = %+v", i, cs.Name, cs.LastTerminationState)
			}
		}
	}
	if pod.Status.PodIP != firstIP {
		t.Errorf("pod IP changed during the crash loop: %s -> %s", firstIP, pod.Status.PodIP)
	}
}

func TestNodeStages(t *testing.T) {
	stages := loadStages(t)
	r := &renderer{now: time.Now(), nodeIP: "10.0.0.1"}

	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0"}}
	node := play(t, r, stages["sim-node-initialize"], bare)
	if node.Status.Phase != corev1.NodeRunning {
		t.Errorf("phase = %s", node.Status.Phase)
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		t.Errorf("node not ready: %+v", node.Status.Conditions)
	}
	if pods := node.Status.Allocatable[corev1.ResourcePods]; pods.Value() < 100 {
		t.Errorf("allocatable pods = %s", pods.String())
	}
	if len(node.Status.Addresses) != 2 {
		t.Errorf("addresses = %+v", node.Status.Addresses)
	}

	// Without --node-ip kwok has no address to offer; an empty one would be invalid.
	r.nodeIP = ""
	if got := play(t, r, stages["sim-node-initialize"], bare).Status.Addresses; len(got) != 1 || got[0].Type != corev1.NodeHostName {
		t.Errorf("addresses without a node IP = %+v, want only the hostname", got)
	}

	// A node created with its own capacity keeps it.
	sized := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourcePods: resource.MustParse("7")},
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.7"}},
		},
	}
	node = play(t, r, stages["sim-node-initialize"], sized)
	if pods := node.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 5 {
		t.Errorf("allocatable pods = %s, want 5", pods.String())
	}
	if len(node.Status.Addresses) != 1 || node.Status.Addresses[0].Address != "192.0.2.7" {
		t.Errorf("addresses = %+v", node.Status.Addresses)
	}

	r.now = r.now.Add(time.Minute)
	beat := play(t, r, stages["sim-node-heartbeat"], node)
	for _, c := range beat.Status.Conditions {
		if !c.LastHeartbeatTime.After(node.Status.Conditions[0].LastHeartbeatTime.Time) {
			t.Errorf("condition %s heartbeat not refreshed", c.Type)
		}
		if c.Status == "" {
			t.Errorf("condition %s lost its status", c.Type)
		}
	}
}
