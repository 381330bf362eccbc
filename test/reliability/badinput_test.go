package reliability

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// badCase is one piece of bad input and the outcome a Flux user is owed:
// either the API server refuses it (reject), or the controller reports it
// (reason) without touching anything.
type badCase struct {
	// name is "<category>: <case>", the row of the table.
	name string
	// id names the case's HelmRelease (and its subtest).
	id string

	// API rejections. spec is a JSON merge patch: merged into a valid spec
	// for a create, and sent as a patch of an existing HelmRelease for an
	// update; metadata, when set, replaces the created object's metadata
	// fields (names) and makes the case create-only.
	spec     string
	metadata map[string]any
	// rules are the CRD rules the case violates, as crdRules names them.
	rules []string
	// reject are substrings the rejection must hold: the field and the
	// rule.
	reject []string

	// Controller outcomes. release builds the HelmRelease (and creates
	// what it needs besides) in b.ns.
	release func(t *testing.T, b *badEnv, name string) *v2.HelmRelease
	// reason is Ready's reason; inMessage (or one of its alternatives,
	// separated by " || ") must be in Ready's message and
	// the event's (%s stands for the namespace).
	reason    string
	inMessage string
	// event is the type of the event with the reason: Warning unless set,
	// "-" for none expected.
	event string
	// stalled: the failure cannot go away without a change, as upstream
	// marks it (Stalled=True).
	stalled bool
	// partial says what Helm itself leaves behind before it fails: then
	// storage and applied objects are recorded, not asserted empty.
	partial string
	// accepted: the input is valid after all; the release must become
	// Ready and stay at revision 1.
	accepted bool
	// check runs once Ready=False holds; its errors are failures.
	check func(ctx context.Context, b *badEnv, hr *v2.HelmRelease) error
	// note documents the outcome beyond Ready.
	note string
}

func (c badCase) api() bool { return c.release == nil }

// badEnv is what the cases share: one namespace with a HelmRepository,
// the charts, a neighbour release and an HelmRelease to send updates to.
type badEnv struct {
	ns        string
	neighbour *v2.HelmRelease
	// target receives the update half of the API cases; it is suspended,
	// so that an update accepted by mistake changes nothing in the cluster.
	target  *v2.HelmRelease
	broken  chartserver.ChartRef // e2e-broken, broken=true
	schema  chartserver.ChartRef // e2e-broken, valid
	invalid chartserver.ChartRef // e2e-badinput
}

// TestBadInput feeds the controller every kind of bad input a user can
// write and checks the promise behind each: a clear refusal by the API
// server, or Ready=False with the exact reason, a message naming the cause
// and an event, while nothing is released or applied and a neighbour in
// the same namespace stays Ready. All cases run at once in one namespace.
func TestBadInput(t *testing.T) {
	start := time.Now()
	b := setupBadInput(t)
	cases := badInputCases()
	checkRuleCoverage(t, cases)

	watch := env.WatchSteady(b.neighbour, 1)
	// t.Run from goroutines rather than t.Parallel: -parallel defaults to
	// the CPU count, and the cases mostly wait for the controller.
	var wg sync.WaitGroup
	for _, tc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(tc.id, func(t *testing.T) { b.run(t, tc) })
		}()
	}
	wg.Wait()

	broken, checks := watch.Stop()
	if err := env.SameStorage(t, b.ns, b.neighbour.Name, nil); err == nil {
		broken = append(broken, "neighbour's Helm storage is empty")
	}
	if stored := env.Storage(t, b.ns, b.neighbour.Name); framework.Describe(stored) != "[v1 deployed]" {
		broken = append(broken, "neighbour's Helm storage is "+framework.Describe(stored))
	}
	for _, b := range broken {
		t.Errorf("neighbour: %s", b)
	}
	report.add(row{Section: "Bad input", Case: "neighbour: stays Ready at revision 1 while every case runs", Runs: 1,
		Failures: broken, Note: fmt.Sprintf("checked %d times; %d cases in %s", checks, len(cases), time.Since(start).Round(time.Second))})
	t.Logf("%d cases in %s", len(cases), time.Since(start).Round(time.Second))
}

func setupBadInput(t *testing.T) *badEnv {
	t.Helper()
	b := &badEnv{ns: env.Namespace(t)}
	env.HelmRepository(t, b.ns)
	b.schema = env.PublishChart(t, "e2e-broken", "0.1.0", b.ns)
	b.broken = env.PublishChart(t, "e2e-broken", "0.2.0", b.ns, chartserver.WithValues(map[string]any{"broken": true}))
	b.invalid = env.PublishChart(t, "e2e-badinput", "0.1.0", b.ns)
	env.OCIRepository(t, b.ns, "podinfo-oci", env.Podinfo.Name, env.Podinfo.Version)

	b.neighbour = env.PodinfoRelease(b.ns, "neighbour", "local", "")
	env.Create(t, b.neighbour)
	b.target = env.PodinfoRelease(b.ns, "update-target", "local", "")
	b.target.Spec.Suspend = true
	env.Create(t, b.target)
	env.WaitRelease(t, b.neighbour, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 3 * time.Minute})
	return b
}

// result collects what broke in one case, for the subtest and the row.
type result struct {
	t        *testing.T
	failures []string
	notes    []string
	// hr is the case's HelmRelease, described in the log when the case
	// fails.
	hr *v2.HelmRelease
}

func (r *result) fail(format string, args ...any) {
	r.t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.t.Error(msg)
	r.failures = append(r.failures, msg)
}

func (r *result) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (b *badEnv) run(t *testing.T, tc badCase) {
	r := &result{t: t}
	start := time.Now()
	// The row is recorded whatever happens, t.Fatal included.
	defer func() {
		if p := recover(); p != nil {
			r.failures = append(r.failures, fmt.Sprintf("panic: %v", p))
			defer panic(p)
		}
		if t.Failed() && len(r.failures) == 0 {
			r.failures = append(r.failures, "the subtest failed (see its log)")
		}
		if t.Failed() && r.hr != nil {
			hr := &v2.HelmRelease{}
			if err := env.Get(context.Background(), hr, r.hr.Namespace, r.hr.Name); err == nil {
				t.Logf("HelmRelease at the end: %s; failures %d install, %d upgrade; history %s; observed generation %d of %d",
					framework.Conditions(hr), hr.Status.InstallFailures, hr.Status.UpgradeFailures,
					framework.Snapshots(hr.Status.History), hr.Status.ObservedGeneration, hr.Generation)
			}
		}
		note := strings.Join(r.notes, "; ")
		if tc.note != "" {
			note += "; " + tc.note
		}
		var failures []string
		if len(r.failures) > 0 {
			// One run, so one entry: everything it broke.
			failures = []string{strings.Join(r.failures, "; ")}
		}
		report.add(row{Section: "Bad input", Case: tc.name, Runs: 1, Failures: failures,
			Note: fmt.Sprintf("%s (%s)", note, time.Since(start).Round(100*time.Millisecond))})
	}()
	if tc.api() {
		b.runRejection(r, tc)
		return
	}
	b.runOutcome(r, tc)
}

// baseSpec is the valid spec the API cases start from.
func (b *badEnv) baseSpec() map[string]any {
	return map[string]any{
		"interval": "10m",
		"chart": map[string]any{"spec": map[string]any{
			"chart": env.Podinfo.Name, "version": env.Podinfo.Version,
			"sourceRef": map[string]any{"kind": "HelmRepository", "name": "local"},
		}},
	}
}

func (b *badEnv) runRejection(r *result, tc badCase) {
	t := r.t
	ctx := context.Background()
	var patch map[string]any
	if err := json.Unmarshal([]byte(tc.spec), &patch); err != nil {
		t.Fatalf("case spec %s: %v", tc.spec, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v2.GroupVersion.String(),
		"kind":       helmv2.HelmReleaseKind,
		"metadata":   map[string]any{"name": tc.id, "namespace": b.ns},
		"spec":       mergePatch(b.baseSpec(), patch),
	}}
	for k, v := range tc.metadata {
		obj.Object["metadata"].(map[string]any)[k] = v
	}
	wantRejected := func(op string, err error) {
		t.Helper()
		if err == nil {
			r.fail("%s accepted, want a rejection naming %q", op, tc.reject)
			return
		}
		if !apierrors.IsInvalid(err) {
			r.fail("%s failed for another reason than validation: %v", op, err)
			return
		}
		for _, want := range tc.reject {
			if !strings.Contains(err.Error(), want) {
				r.fail("%s rejection %q does not say %q", op, err, want)
			}
		}
	}

	err := env.Client.Create(ctx, obj)
	wantRejected("create", err)
	if err == nil {
		_ = env.Client.Delete(ctx, obj)
	} else {
		r.note("rejected: %s", rejection(err))
	}
	if err := env.Get(ctx, &v2.HelmRelease{}, b.ns, obj.GetName()); !apierrors.IsNotFound(err) && len(obj.GetName()) <= 253 {
		r.fail("HelmRelease %s exists after a refused create: %v", obj.GetName(), err)
	}

	if tc.metadata == nil {
		before := &v2.HelmRelease{}
		if err := env.Get(ctx, before, b.ns, b.target.Name); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"spec": patch})
		err := env.Client.Patch(ctx, b.target.DeepCopy(), client.RawPatch(types.MergePatchType, body))
		wantRejected("update", err)
		after := &v2.HelmRelease{}
		if err := env.Get(ctx, after, b.ns, b.target.Name); err != nil {
			t.Fatal(err)
		}
		if after.Generation != before.Generation {
			r.fail("update target changed from generation %d to %d", before.Generation, after.Generation)
		}
		if err != nil {
			r.note("update refused too")
		}
	}
	// Nothing can have been released for an object that does not exist;
	// checked all the same, as cheaply as it is.
	if stored := env.Storage(t, b.ns, shortenReleaseName(tc.id)); len(stored) > 0 {
		r.fail("Helm storage for a refused HelmRelease: %s", framework.Describe(stored))
	}
	b.wantNeighbour(r)
}

// rejection is the API server's message without the object's name.
func rejection(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, " is invalid: "); i >= 0 {
		msg = msg[i+len(" is invalid: "):]
	}
	return clip(msg, 200)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// mergePatch applies an RFC 7386 merge patch to doc.
func mergePatch(doc, patch map[string]any) map[string]any {
	for k, v := range patch {
		if v == nil {
			delete(doc, k)
			continue
		}
		pm, ok := v.(map[string]any)
		dm, isMap := doc[k].(map[string]any)
		if ok && isMap {
			doc[k] = mergePatch(dm, pm)
			continue
		}
		if ok {
			doc[k] = mergePatch(map[string]any{}, pm)
			continue
		}
		doc[k] = v
	}
	return doc
}

// shortenReleaseName is how the controller names a release whose name is
// longer than Helm allows (as upstream: the first 40 characters, a dash
// and 12 hex characters of the SHA-256 of the name).
func shortenReleaseName(name string) string {
	if len(name) <= 53 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:40] + "-" + hex.EncodeToString(sum[:])[:12]
}

// releaseOf returns the storage namespace, release name and release
// namespace of hr.
func releaseOf(hr *v2.HelmRelease) (storageNS, release, releaseNS string) {
	up := hr.Upstream()
	return up.GetStorageNamespace(), shortenReleaseName(up.GetReleaseName()), up.GetReleaseNamespace()
}

func (b *badEnv) runOutcome(r *result, tc badCase) {
	t := r.t
	ctx := context.Background()
	hr := tc.release(t, b, tc.id)
	env.Create(t, hr)
	r.hr = hr
	storageNS, release, releaseNS := releaseOf(hr)
	namespaces := slices.Compact([]string{b.ns, releaseNS})
	inMessage := strings.ReplaceAll(tc.inMessage, "%s", b.ns)
	alts := strings.Split(inMessage, " || ")

	// untouched returns what the release left behind: Helm storage and
	// applied objects.
	untouched := func(ctx context.Context) error {
		stored, err := env.ReadStorage(ctx, env.Client, storageNS, release)
		if err != nil {
			return err
		}
		objs, err := env.ReleaseObjects(ctx, b.ns, hr.Name, release, namespaces...)
		if err != nil {
			return err
		}
		if len(stored) > 0 || len(objs) > 0 {
			return fmt.Errorf("Helm storage %s, applied %v", framework.Describe(stored), objs)
		}
		return nil
	}

	if tc.accepted {
		b.runAccepted(r, tc, hr, storageNS, release)
		return
	}

	// Ready=False with the reason and the message; Ready=True at any
	// point is a failure of its own.
	var sawTrue string
	var ready *metav1.Condition
	err := env.Poll(2*time.Minute, func(ctx context.Context) error {
		if err := env.Get(ctx, hr, b.ns, hr.Name); err != nil {
			return err
		}
		ready = conditions.Get(hr, meta.ReadyCondition)
		if ready != nil && ready.Status == metav1.ConditionTrue && sawTrue == "" {
			sawTrue = fmt.Sprintf("Ready=True/%s %q", ready.Reason, ready.Message)
		}
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tc.reason {
			return fmt.Errorf("Ready %s, want False/%s", describeCondition(ready), tc.reason)
		}
		if !slices.ContainsFunc(alts, func(a string) bool { return strings.Contains(ready.Message, a) }) {
			return fmt.Errorf("Ready=False/%s message %q does not name %q", ready.Reason, ready.Message, inMessage)
		}
		return nil
	})
	if sawTrue != "" {
		r.fail("Ready was True for bad input: %s", sawTrue)
	}
	if err != nil {
		r.note("Ready %s", describeCondition(ready))
		r.fail("%v", err)
		b.wantNeighbour(r)
		return
	}
	r.note("Ready=False/%s: %s", ready.Reason, clip(ready.Message, 300))
	t.Logf("Ready=False/%s: %s", ready.Reason, ready.Message)
	if tc.stalled {
		// A failure that is retried (remediation with retries) reads
		// Ready=False before it stalls.
		if err := env.Poll(time.Minute, func(ctx context.Context) error {
			if err := env.Get(ctx, hr, b.ns, hr.Name); err != nil {
				return err
			}
			if !conditions.IsStalled(hr) {
				return fmt.Errorf("not Stalled: %s", framework.Conditions(hr))
			}
			return nil
		}); err != nil {
			r.fail("%v", err)
		}
		if c := conditions.Get(hr, meta.ReadyCondition); c != nil {
			ready = c
		}
	}

	switch tc.event {
	case "-":
	default:
		typ := tc.event
		if typ == "" {
			typ = corev1.EventTypeWarning
		}
		want := framework.EventWant{Type: typ, Reason: tc.reason, Contains: alts[0]}
		if err := env.Poll(30*time.Second, func(ctx context.Context) error {
			var err error
			for _, a := range alts {
				want.Contains = a
				if _, err = env.FindEvent(ctx, b.ns, hr.Name, want); err == nil {
					return nil
				}
			}
			return err
		}); err != nil {
			r.fail("%v", err)
		} else if typ != corev1.EventTypeWarning {
			r.note("%s event, as upstream", typ)
		}
	}

	// Then it stays so: Ready never True, the same reason and message, and
	// (unless Helm itself got as far as storage) nothing released.
	message := ready.Message
	window := 4 * time.Second
	end := time.Now().Add(window)
	var stayErr error
	retries := 0
	for time.Now().Before(end) && stayErr == nil {
		stayErr = func() error {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := env.Get(ctx, hr, b.ns, hr.Name); err != nil {
				return err
			}
			c := conditions.Get(hr, meta.ReadyCondition)
			if c != nil && c.Status == metav1.ConditionUnknown && !tc.stalled {
				// A retry about to run, as upstream announces it; it
				// must end where it started.
				retries++
				return nil
			}
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
				return fmt.Errorf("Ready moved on to %s", describeCondition(c))
			}
			if c.Message != message {
				return fmt.Errorf("Ready's message changed from %q to %q", clip(message, 400), clip(c.Message, 400))
			}
			if tc.partial == "" {
				return untouched(ctx)
			}
			return nil
		}()
		time.Sleep(framework.PollInterval)
	}
	if stayErr != nil {
		r.fail("within %s of Ready=False: %v", window, stayErr)
	}
	if retries > 0 {
		r.note("seen retrying (Ready=Unknown) %d times in %s", retries, window)
	}
	if tc.partial != "" {
		stored := env.Storage(t, storageNS, release)
		objs, err := env.ReleaseObjects(ctx, b.ns, hr.Name, release, namespaces...)
		if err != nil {
			t.Fatal(err)
		}
		r.note("Helm leaves %s: storage %s, objects %v", tc.partial, framework.Describe(stored), objs)
	}
	if got := conditions.IsStalled(hr); got != tc.stalled {
		r.fail("Stalled=%t, want %t (%s)", got, tc.stalled, framework.Conditions(hr))
	}
	// As upstream, a failure that waits for nothing is a finished
	// reconcile of the generation (kstatus reads Stalled only then); one
	// that is retried, or waits for something outside the HelmRelease, is
	// not.
	if observed := hr.Status.ObservedGeneration == hr.Generation; observed != tc.stalled {
		r.fail("observedGeneration %d at generation %d: want observed=%t for a failure that is %s",
			hr.Status.ObservedGeneration, hr.Generation, tc.stalled, map[bool]string{true: "stalled", false: "retried"}[tc.stalled])
	}
	if tc.stalled {
		r.note("stalled")
	} else {
		r.note("retrying")
	}
	if tc.check != nil {
		if err := tc.check(ctx, b, hr); err != nil {
			r.fail("%v", err)
		}
	}
	b.wantNeighbour(r)
}

// runAccepted checks a case whose input turns out valid: the release
// installs once and stays as it is.
func (b *badEnv) runAccepted(r *result, tc badCase, hr *v2.HelmRelease, storageNS, release string) {
	t := r.t
	if err := env.Poll(2*time.Minute, func(ctx context.Context) error {
		if err := env.Get(ctx, hr, b.ns, hr.Name); err != nil {
			return err
		}
		return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: tc.reason, Version: 1})
	}); err != nil {
		r.fail("%v", err)
		return
	}
	r.note("accepted: Ready=True/%s at revision 1", tc.reason)
	before := env.Storage(t, storageNS, release)
	resourceVersion := hr.ResourceVersion
	time.Sleep(4 * time.Second)
	if err := env.SameStorage(t, storageNS, release, before); err != nil {
		r.fail("%v", err)
	}
	if err := env.Get(context.Background(), hr, b.ns, hr.Name); err != nil {
		t.Fatal(err)
	}
	if hr.ResourceVersion != resourceVersion {
		r.fail("the HelmRelease keeps changing (resourceVersion %s, then %s): %s", resourceVersion, hr.ResourceVersion, framework.Conditions(hr))
	}
	if tc.check != nil {
		if err := tc.check(context.Background(), b, hr); err != nil {
			r.fail("%v", err)
		}
	}
	b.wantNeighbour(r)
}

func (b *badEnv) wantNeighbour(r *result) {
	hr := &v2.HelmRelease{}
	if err := env.Get(context.Background(), hr, b.ns, b.neighbour.Name); err != nil {
		r.fail("neighbour: %v", err)
		return
	}
	if err := framework.ReleaseReady(hr, framework.ReleaseWant{Version: 1}); err != nil || hr.Generation != b.neighbour.Generation {
		r.fail("neighbour not Ready at revision 1 and generation %d: %v (generation %d)", b.neighbour.Generation, err, hr.Generation)
	}
}

func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%s %q", c.Status, c.Reason, clip(c.Message, 400))
}

// Release builders.

func (b *badEnv) podinfo(name string) *v2.HelmRelease {
	hr := env.PodinfoRelease(b.ns, name, "local", "")
	// Short waits: nothing in these releases is slow.
	hr.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Second}
	return hr
}

func (b *badEnv) chart(name string, ref chartserver.ChartRef, values string) *v2.HelmRelease {
	hr := framework.Release(b.ns, name, "local", ref.Name, ref.Version, values)
	hr.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Second}
	return hr
}

func (b *badEnv) chartRef(hr *v2.HelmRelease, kind, name string) *v2.HelmRelease {
	hr.Spec.Chart = nil
	hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: kind, Name: name}
	return hr
}

func (b *badEnv) create(t *testing.T, obj client.Object) {
	t.Helper()
	obj.SetNamespace(b.ns)
	env.Create(t, obj)
}

// withValuesFrom returns a builder of podinfo with valuesFrom refs,
// creating objs first.
func withValuesFrom(refs []helmv2.ValuesReference, objs ...func(ns string) client.Object) func(*testing.T, *badEnv, string) *v2.HelmRelease {
	return func(t *testing.T, b *badEnv, name string) *v2.HelmRelease {
		for _, o := range objs {
			b.create(t, o(b.ns))
		}
		hr := b.podinfo(name)
		hr.Spec.ValuesFrom = refs
		return hr
	}
}

func configMap(name string, data map[string]string) func(string) client.Object {
	return func(ns string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	}
}

func secret(name string, data map[string]string) func(string) client.Object {
	return func(ns string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
	}
}

func patches(ps ...kustomize.Patch) []helmv2.PostRenderer {
	return []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: ps}}}
}

// randomText is n bytes of base64 text that gzip cannot shrink much.
func randomText(t *testing.T, n int) string {
	raw := make([]byte, n*3/4)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// retriedNothingStored documents an install failure before Helm stored
// anything.
const retriedNothingStored = "retried with backoff as upstream: Helm stored nothing, so no failure is counted against the retries"

// kubeconfig is a kubeconfig for server, trusting a CA of its own, or
// skipping TLS verification when insecure.
func kubeconfig(t *testing.T, server string, insecure bool) string {
	tls := "    insecure-skip-tls-verify: true"
	if !insecure {
		tls = "    certificate-authority-data: " + base64.StdEncoding.EncodeToString(caPEM(t))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster:
    server: %s
%s
contexts:
- name: gone
  context:
    cluster: gone
    user: gone
current-context: gone
users:
- name: gone
  user:
    token: not-a-token
`, server, tls)
}

// caPEM is a self-signed CA certificate nobody holds a key to any more.
func caPEM(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bad-input-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func badInputCases() []badCase {
	cases := []badCase{
		// Specs: every enum, pattern and CEL rule of the CRD, refused on
		// create and on update.
		{name: "specs: chart.spec.reconcileStrategy enum", id: "enum-reconcile-strategy", spec: `{"chart":{"spec":{"reconcileStrategy":"Always"}}}`,
			rules: []string{"spec.chart.spec.reconcileStrategy enum"}, reject: []string{"spec.chart.spec.reconcileStrategy", `Unsupported value: "Always"`}},
		{name: "sources: chart template sourceRef of a wrong kind (enum)", id: "enum-source-kind", spec: `{"chart":{"spec":{"sourceRef":{"kind":"OCIRepository","name":"local"}}}}`,
			rules: []string{"spec.chart.spec.sourceRef.kind enum"}, reject: []string{"spec.chart.spec.sourceRef.kind", `Unsupported value: "OCIRepository"`}},
		{name: "specs: chart.spec.verify.provider enum", id: "enum-verify-provider", spec: `{"chart":{"spec":{"verify":{"provider":"pgp"}}}}`,
			rules: []string{"spec.chart.spec.verify.provider enum"}, reject: []string{"spec.chart.spec.verify.provider", `Unsupported value: "pgp"`}},
		{name: "sources: chartRef of a wrong kind (enum)", id: "enum-chartref-kind", spec: `{"chart":null,"chartRef":{"kind":"GitRepository","name":"podinfo"}}`,
			rules: []string{"spec.chartRef.kind enum"}, reject: []string{"spec.chartRef.kind", `Unsupported value: "GitRepository"`}},
		{name: "specs: driftDetection.mode enum", id: "enum-drift-mode", spec: `{"driftDetection":{"mode":"on"}}`,
			rules: []string{"spec.driftDetection.mode enum"}, reject: []string{"spec.driftDetection.mode", `Unsupported value: "on"`}},
		{name: "specs: install.crds enum", id: "enum-install-crds", spec: `{"install":{"crds":"Sometimes"}}`,
			rules: []string{"spec.install.crds enum"}, reject: []string{"spec.install.crds", `Unsupported value: "Sometimes"`}},
		{name: "specs: install.strategy.name enum", id: "enum-install-strategy", spec: `{"install":{"strategy":{"name":"GiveUp"}}}`,
			rules: []string{"spec.install.strategy.name enum"}, reject: []string{"spec.install.strategy.name", `Unsupported value: "GiveUp"`}},
		{name: "specs: install.waitStrategy enum", id: "enum-install-wait", spec: `{"install":{"waitStrategy":"AfterHooks"}}`,
			rules: []string{"spec.install.waitStrategy enum"}, reject: []string{"spec.install.waitStrategy", `Unsupported value: "AfterHooks"`, `"beforeHooks", "afterHooks"`}},
		{name: "specs: postRenderStrategy enum", id: "enum-postrender-strategy", spec: `{"postRenderStrategy":"all"}`,
			rules: []string{"spec.postRenderStrategy enum"}, reject: []string{"spec.postRenderStrategy", `Unsupported value: "all"`}},
		{name: "specs: rollback.serverSideApply enum", id: "enum-rollback-ssa", spec: `{"rollback":{"serverSideApply":"yes"}}`,
			rules: []string{"spec.rollback.serverSideApply enum"}, reject: []string{"spec.rollback.serverSideApply", `Unsupported value: "yes"`}},
		{name: "specs: rollback.waitStrategy enum", id: "enum-rollback-wait", spec: `{"rollback":{"waitStrategy":"never"}}`,
			rules: []string{"spec.rollback.waitStrategy enum"}, reject: []string{"spec.rollback.waitStrategy", `Unsupported value: "never"`}},
		{name: "specs: waitStrategy.readinessTimeout pattern", id: "pattern-readiness-timeout", spec: `{"waitStrategy":{"name":"ordered","readinessTimeout":"2 minutes"}}`,
			rules: []string{"spec.waitStrategy.readinessTimeout pattern"}, reject: []string{"spec.waitStrategy.readinessTimeout", "should match"}},
		{name: "specs: uninstall.deletionPropagation enum", id: "enum-deletion-propagation", spec: `{"uninstall":{"deletionPropagation":"cascade"}}`,
			rules: []string{"spec.uninstall.deletionPropagation enum"}, reject: []string{"spec.uninstall.deletionPropagation", `Unsupported value: "cascade"`}},
		{name: "specs: upgrade.chartNameChangeStrategy enum", id: "enum-chart-name-change", spec: `{"upgrade":{"chartNameChangeStrategy":"Rename"}}`,
			rules: []string{"spec.upgrade.chartNameChangeStrategy enum"}, reject: []string{"spec.upgrade.chartNameChangeStrategy", `Unsupported value: "Rename"`}},
		{name: "specs: upgrade.crds enum", id: "enum-upgrade-crds", spec: `{"upgrade":{"crds":"Replace"}}`,
			rules: []string{"spec.upgrade.crds enum"}, reject: []string{"spec.upgrade.crds", `Unsupported value: "Replace"`}},
		{name: "specs: upgrade.remediation.strategy enum", id: "enum-upgrade-remediation", spec: `{"upgrade":{"remediation":{"strategy":"reinstall"}}}`,
			rules: []string{"spec.upgrade.remediation.strategy enum"}, reject: []string{"spec.upgrade.remediation.strategy", `Unsupported value: "reinstall"`}},
		{name: "specs: upgrade.serverSideApply enum", id: "enum-upgrade-ssa", spec: `{"upgrade":{"serverSideApply":"true"}}`,
			rules: []string{"spec.upgrade.serverSideApply enum"}, reject: []string{"spec.upgrade.serverSideApply", `Unsupported value: "true"`}},
		{name: "specs: upgrade.strategy.name enum", id: "enum-upgrade-strategy", spec: `{"upgrade":{"strategy":{"name":"Retry"}}}`,
			rules: []string{"spec.upgrade.strategy.name enum"}, reject: []string{"spec.upgrade.strategy.name", `Unsupported value: "Retry"`}},
		{name: "specs: upgrade.waitStrategy enum", id: "enum-upgrade-wait", spec: `{"upgrade":{"waitStrategy":"afterhooks"}}`,
			rules: []string{"spec.upgrade.waitStrategy enum"}, reject: []string{"spec.upgrade.waitStrategy", `Unsupported value: "afterhooks"`}},
		{name: "values: valuesFrom kind enum", id: "enum-values-kind", spec: `{"valuesFrom":[{"kind":"Values","name":"x"}]}`,
			rules: []string{"spec.valuesFrom[].kind enum"}, reject: []string{"spec.valuesFrom[0].kind", `Unsupported value: "Values"`}},
		{name: "specs: waitStrategy.name enum", id: "enum-wait-strategy-name", spec: `{"waitStrategy":{"name":"kstatus"}}`,
			rules: []string{"spec.waitStrategy.name enum"}, reject: []string{"spec.waitStrategy.name", `Unsupported value: "kstatus"`}},

		{name: "settings: chart.spec.interval pattern", id: "pattern-chart-interval", spec: `{"chart":{"spec":{"interval":"1 minute"}}}`,
			rules: []string{"spec.chart.spec.interval pattern"}, reject: []string{"spec.chart.spec.interval", "should match"}},
		{name: "settings: install.strategy.retryInterval pattern", id: "pattern-install-retry", spec: `{"install":{"strategy":{"name":"RetryOnFailure","retryInterval":"soon"}}}`,
			rules: []string{"spec.install.strategy.retryInterval pattern"}, reject: []string{"spec.install.strategy.retryInterval", "should match"}},
		{name: "settings: install.timeout pattern", id: "pattern-install-timeout", spec: `{"install":{"timeout":"5"}}`,
			rules: []string{"spec.install.timeout pattern"}, reject: []string{"spec.install.timeout", "should match"}},
		{name: "settings: interval of 0 without a unit (pattern)", id: "pattern-interval", spec: `{"interval":"0"}`,
			rules: []string{"spec.interval pattern"}, reject: []string{"spec.interval", "should match"}},
		{name: "settings: rollback.timeout pattern", id: "pattern-rollback-timeout", spec: `{"rollback":{"timeout":"-1m"}}`,
			rules: []string{"spec.rollback.timeout pattern"}, reject: []string{"spec.rollback.timeout", "should match"}},
		{name: "settings: test.timeout pattern", id: "pattern-test-timeout", spec: `{"test":{"timeout":"1d"}}`,
			rules: []string{"spec.test.timeout pattern"}, reject: []string{"spec.test.timeout", "should match"}},
		{name: "settings: timeout pattern", id: "pattern-timeout", spec: `{"timeout":"1h30"}`,
			rules: []string{"spec.timeout pattern"}, reject: []string{"spec.timeout", "should match"}},
		{name: "settings: uninstall.timeout pattern", id: "pattern-uninstall-timeout", spec: `{"uninstall":{"timeout":"forever"}}`,
			rules: []string{"spec.uninstall.timeout pattern"}, reject: []string{"spec.uninstall.timeout", "should match"}},
		{name: "settings: uninstall.deleteHookResourceKinds pattern", id: "pattern-hook-kinds", spec: `{"uninstall":{"deleteHookResources":true,"deleteHookResourceKinds":["secrets/v1"]}}`,
			rules: []string{"spec.uninstall.deleteHookResourceKinds[] pattern"}, reject: []string{"spec.uninstall.deleteHookResourceKinds[0]", "should match"}},
		{name: "settings: upgrade.strategy.retryInterval pattern", id: "pattern-upgrade-retry", spec: `{"upgrade":{"strategy":{"name":"RetryOnFailure","retryInterval":"2 m"}}}`,
			rules: []string{"spec.upgrade.strategy.retryInterval pattern"}, reject: []string{"spec.upgrade.strategy.retryInterval", "should match"}},
		{name: "settings: upgrade.timeout pattern", id: "pattern-upgrade-timeout", spec: `{"upgrade":{"timeout":"1w"}}`,
			rules: []string{"spec.upgrade.timeout pattern"}, reject: []string{"spec.upgrade.timeout", "should match"}},
		{name: "values: targetPath pattern", id: "pattern-target-path", spec: `{"valuesFrom":[{"kind":"ConfigMap","name":"x","targetPath":"a b"}]}`,
			rules: []string{"spec.valuesFrom[].targetPath pattern"}, reject: []string{"spec.valuesFrom[0].targetPath", "should match"}},
		{name: "values: valuesKey pattern", id: "pattern-values-key", spec: `{"valuesFrom":[{"kind":"ConfigMap","name":"x","valuesKey":"values/yaml"}]}`,
			rules: []string{"spec.valuesFrom[].valuesKey pattern"}, reject: []string{"spec.valuesFrom[0].valuesKey", "should match"}},

		{name: "sources: both chart and chartRef (CEL)", id: "cel-chart-and-chartref", spec: `{"chartRef":{"kind":"OCIRepository","name":"podinfo-oci"}}`,
			rules: []string{"spec cel[0]"}, reject: []string{"spec", "either chart or chartRef must be set"}},
		{name: "sources: neither chart nor chartRef (CEL)", id: "cel-no-chart", spec: `{"chart":null}`,
			rules: []string{"spec cel[0]"}, reject: []string{"spec", "either chart or chartRef must be set"}},
		{name: "specs: install afterHooks with disableWait (CEL)", id: "cel-install-afterhooks", spec: `{"install":{"waitStrategy":"afterHooks","disableWait":true}}`,
			rules: []string{"spec.install cel[0]"}, reject: []string{"spec.install", "waitStrategy afterHooks cannot be combined with disableWait"}},
		{name: "specs: upgrade afterHooks with disableWait (CEL)", id: "cel-upgrade-afterhooks", spec: `{"upgrade":{"waitStrategy":"afterHooks","disableWait":true}}`,
			rules: []string{"spec.upgrade cel[0]"}, reject: []string{"spec.upgrade", "waitStrategy afterHooks cannot be combined with disableWait"}},
		{name: "specs: rollback afterHooks with disableWait (CEL)", id: "cel-rollback-afterhooks", spec: `{"rollback":{"waitStrategy":"afterHooks","disableWait":true}}`,
			rules: []string{"spec.rollback cel[0]"}, reject: []string{"spec.rollback", "waitStrategy afterHooks cannot be combined with disableWait"}},
		{name: "specs: install.strategy retryInterval with RemediateOnFailure (CEL)", id: "cel-install-retry", spec: `{"install":{"strategy":{"name":"RemediateOnFailure","retryInterval":"1m"}}}`,
			rules: []string{"spec.install.strategy cel[0]"}, reject: []string{"spec.install.strategy", ".retryInterval cannot be set when .name is 'RemediateOnFailure'"}},
		{name: "specs: upgrade.strategy retryInterval with RemediateOnFailure (CEL)", id: "cel-upgrade-retry", spec: `{"upgrade":{"strategy":{"name":"RemediateOnFailure","retryInterval":"1m"}}}`,
			rules: []string{"spec.upgrade.strategy cel[0]"}, reject: []string{"spec.upgrade.strategy", ".retryInterval can only be set when .name is 'RetryOnFailure'"}},
		{name: "sources: OCIRepository chart template without url (CEL)", id: "cel-oci-no-url", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null}}}`,
			rules: []string{"spec.chart cel[0]"}, reject: []string{"spec.chart", "chart.spec.url must be set when chart.kind is 'OCIRepository'"}},
		{name: "sources: url in a HelmChart template (CEL)", id: "cel-url-helmchart", spec: `{"chart":{"spec":{"url":"oci://registry.local/charts/podinfo"}}}`,
			rules: []string{"spec.chart cel[1]"}, reject: []string{"spec.chart", "chart.spec.url requires chart.kind: 'OCIRepository'"}},
		{name: "sources: HelmChart template without sourceRef (CEL)", id: "cel-helmchart-no-source", spec: `{"chart":{"spec":{"sourceRef":null}}}`,
			rules: []string{"spec.chart cel[2]"}, reject: []string{"spec.chart", "chart.spec.chart and chart.spec.sourceRef must be set when chart.kind is not 'OCIRepository'"}},
		{name: "sources: OCIRepository chart template with chart (CEL)", id: "cel-oci-chart", spec: `{"chart":{"kind":"OCIRepository","spec":{"version":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo"}}}`,
			rules: []string{"spec.chart cel[3]"}, reject: []string{"spec.chart", "chart.spec.chart cannot be set when chart.kind is 'OCIRepository'"}},
		{name: "sources: OCIRepository chart template with version (CEL)", id: "cel-oci-version", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo"}}}`,
			rules: []string{"spec.chart cel[4]"}, reject: []string{"spec.chart", "chart.spec.version cannot be set when chart.kind is 'OCIRepository'"}},
		{name: "sources: OCIRepository chart template with sourceRef (CEL)", id: "cel-oci-sourceref", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"url":"oci://registry.local/charts/podinfo"}}}`,
			rules: []string{"spec.chart cel[5]"}, reject: []string{"spec.chart", "chart.spec.sourceRef cannot be set when chart.kind is 'OCIRepository'"}},
		{name: "sources: OCIRepository chart template with reconcileStrategy Revision (CEL)", id: "cel-oci-strategy", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo","reconcileStrategy":"Revision"}}}`,
			rules: []string{"spec.chart cel[6]"}, reject: []string{"spec.chart", "chart.spec.reconcileStrategy cannot be set when chart.kind is 'OCIRepository'"}},
		{name: "sources: OCIRepository chart template with valuesFiles (CEL)", id: "cel-oci-valuesfiles", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo","valuesFiles":["values-prod.yaml"]}}}`,
			rules: []string{"spec.chart cel[7]"}, reject: []string{"spec.chart", "chart.spec.valuesFiles cannot be set when chart.kind is 'OCIRepository'"}},
		{name: "sources: OCIRepository chart template with ignoreMissingValuesFiles (CEL)", id: "cel-oci-ignoremissing", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo","ignoreMissingValuesFiles":true}}}`,
			rules: []string{"spec.chart cel[8]"}, reject: []string{"spec.chart", "chart.spec.ignoreMissingValuesFiles cannot be set when chart.kind is 'OCIRepository'"}},
		{name: "sources: chart template of a wrong kind (enum)", id: "enum-chart-kind", spec: `{"chart":{"kind":"GitRepository"}}`,
			rules: []string{"spec.chart.kind enum"}, reject: []string{"spec.chart.kind", `Unsupported value: "GitRepository"`}},
		{name: "specs: OCIRepository chart template layerSelector.operation enum", id: "enum-oci-layer-op", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo","layerSelector":{"operation":"move"}}}}`,
			rules: []string{"spec.chart.spec.layerSelector.operation enum"}, reject: []string{"spec.chart.spec.layerSelector.operation", `Unsupported value: "move"`}},
		{name: "specs: OCIRepository chart template provider enum", id: "enum-oci-provider", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo","provider":"github"}}}`,
			rules: []string{"spec.chart.spec.provider enum"}, reject: []string{"spec.chart.spec.provider", `Unsupported value: "github"`}},
		{name: "specs: OCIRepository chart template timeout pattern", id: "pattern-oci-timeout", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null,"url":"oci://registry.local/charts/podinfo","timeout":"1h"}}}`,
			rules: []string{"spec.chart.spec.timeout pattern"}, reject: []string{"spec.chart.spec.timeout", "should match"}},
		{name: "sources: OCIRepository chart template url not oci:// (pattern)", id: "pattern-oci-url", spec: `{"chart":{"kind":"OCIRepository","spec":{"chart":null,"version":null,"sourceRef":null,"url":"https://registry.local/charts/podinfo"}}}`,
			rules: []string{"spec.chart.spec.url pattern"}, reject: []string{"spec.chart.spec.url", "should match"}},
		{name: "clusters: kubeConfig without a reference (CEL)", id: "cel-kubeconfig-none", spec: `{"kubeConfig":{}}`,
			rules: []string{"spec.kubeConfig cel[0]"}, reject: []string{"spec.kubeConfig", "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified"}},
		{name: "clusters: kubeConfig with both references (CEL)", id: "cel-kubeconfig-both", spec: `{"kubeConfig":{"secretRef":{"name":"a"},"configMapRef":{"name":"b"}}}`,
			rules: []string{"spec.kubeConfig cel[0]"}, reject: []string{"spec.kubeConfig", "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified"}},
		{name: "specs: interval missing (required)", id: "required-interval", spec: `{"interval":null}`,
			reject: []string{"spec.interval", "Required value"}},

		// Names the API server refuses.
		{name: "names: HelmRelease name over 253 characters", id: "name-too-long", spec: `{}`,
			metadata: map[string]any{"name": strings.Repeat("n", 254)}, reject: []string{"metadata.name", "must be no more than 253 characters"}},
		{name: "names: HelmRelease name not a DNS subdomain", id: "name-not-dns", spec: `{}`,
			metadata: map[string]any{"name": "Bad_Name"}, reject: []string{"metadata.name", "RFC 1123 subdomain"}},
		{name: "names: releaseName over 53 characters", id: "release-name-too-long", spec: fmt.Sprintf(`{"releaseName":%q}`, strings.Repeat("r", 54)),
			reject: []string{"spec.releaseName", "Too long"}},
		{name: "names: targetNamespace over 63 characters", id: "target-ns-too-long", spec: fmt.Sprintf(`{"targetNamespace":%q}`, strings.Repeat("t", 64)),
			reject: []string{"spec.targetNamespace", "Too long"}},
		{name: "names: storageNamespace over 63 characters", id: "storage-ns-too-long", spec: fmt.Sprintf(`{"storageNamespace":%q}`, strings.Repeat("s", 64)),
			reject: []string{"spec.storageNamespace", "Too long"}},
		{name: "names: serviceAccountName over 253 characters", id: "sa-too-long", spec: fmt.Sprintf(`{"serviceAccountName":%q}`, strings.Repeat("a", 254)),
			reject: []string{"spec.serviceAccountName", "Too long"}},
		{name: "names: chart name over 2048 characters", id: "chart-name-too-long", spec: fmt.Sprintf(`{"chart":{"spec":{"chart":%q}}}`, strings.Repeat("c", 2049)),
			reject: []string{"spec.chart.spec.chart", "Too long"}},
		{name: "names: empty releaseName", id: "release-name-empty", spec: `{"releaseName":""}`,
			reject: []string{"spec.releaseName", "at least 1 chars long"}},
	}
	return append(cases, outcomeCases()...)
}

func outcomeCases() []badCase {
	return []badCase{
		// Sources.
		{name: "sources: missing HelmRepository", id: "missing-repo", reason: "SourceNotReady", inMessage: "ghost-repo",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.Chart.Spec.SourceRef.Name = "ghost-repo"
				return hr
			}},
		{name: "sources: missing chart version", id: "missing-version", reason: "SourceNotReady", inMessage: "99.0.0",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.Chart.Spec.Version = "99.0.0"
				return hr
			}},
		{name: "sources: chart not in the repository", id: "missing-chart", reason: "SourceNotReady", inMessage: "no chart name found",
			note: "source-controller's wording, as upstream: the HelmChart is named after the HelmRelease, not the chart",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.Chart.Spec.Chart = "ghost-chart"
				return hr
			}},
		{name: "sources: HelmRepository at an unreachable URL", id: "unreachable-repo", reason: "SourceNotReady", inMessage: "HelmRepository source 'unreachable'",
			note: "source-controller's HelmChart message, as upstream: it names the repository, whose own Ready says why",
			release: func(t *testing.T, b *badEnv, name string) *v2.HelmRelease {
				b.create(t, &sourcev1.HelmRepository{
					ObjectMeta: metav1.ObjectMeta{Name: "unreachable"},
					Spec: sourcev1.HelmRepositorySpec{URL: "http://127.0.0.1:1/charts", Interval: metav1.Duration{Duration: time.Minute},
						Timeout: &metav1.Duration{Duration: 5 * time.Second}},
				})
				hr := b.podinfo(name)
				hr.Spec.Chart.Spec.SourceRef.Name = "unreachable"
				return hr
			}},
		{name: "sources: missing OCIRepository (chartRef)", id: "missing-oci", reason: helmv2.ArtifactFailedReason, inMessage: "ghost-oci",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.chartRef(b.podinfo(name), sourcev1.OCIRepositoryKind, "ghost-oci")
			}},
		{name: "sources: missing HelmChart (chartRef)", id: "missing-helmchart", reason: helmv2.ArtifactFailedReason, inMessage: "ghost-helmchart",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.chartRef(b.podinfo(name), sourcev1.HelmChartKind, "ghost-helmchart")
			}},
		{name: "sources: missing ExternalArtifact (chartRef)", id: "missing-artifact", reason: helmv2.ArtifactFailedReason, inMessage: "ghost-artifact",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.chartRef(b.podinfo(name), sourcev1.ExternalArtifactKind, "ghost-artifact")
			}},

		// Values.
		{name: "values: missing valuesFrom Secret", id: "values-missing-secret", reason: "ValuesError", inMessage: "ghost-secret",
			release: withValuesFrom([]helmv2.ValuesReference{{Kind: "Secret", Name: "ghost-secret"}})},
		{name: "values: missing valuesFrom ConfigMap", id: "values-missing-configmap", reason: "ValuesError", inMessage: "ghost-configmap",
			release: withValuesFrom([]helmv2.ValuesReference{{Kind: "ConfigMap", Name: "ghost-configmap"}})},
		{name: "values: missing key", id: "values-missing-key", reason: "ValuesError", inMessage: "custom.yaml",
			release: withValuesFrom([]helmv2.ValuesReference{{Kind: "Secret", Name: "values-without-key", ValuesKey: "custom.yaml"}},
				secret("values-without-key", map[string]string{"other.yaml": "replicaCount: 2\n"}))},
		{name: "values: broken YAML", id: "values-broken-yaml", reason: "ValuesError", inMessage: "broken-yaml",
			release: withValuesFrom([]helmv2.ValuesReference{{Kind: "ConfigMap", Name: "broken-yaml"}},
				configMap("broken-yaml", map[string]string{"values.yaml": "replicaCount: [1, 2\nui: {color: \n"}))},
		{name: "values: bad targetPath", id: "values-bad-target-path", reason: "ValuesError", inMessage: "index of 99999 is greater than maximum supported index",
			note: "fluxcd/pkg/chartutil's message, as upstream: it names the ConfigMap, the key and the index, not targetPath",
			release: withValuesFrom([]helmv2.ValuesReference{{Kind: "ConfigMap", Name: "one-value", ValuesKey: "value", TargetPath: "list[99999]"}},
				configMap("one-value", map[string]string{"value": "x"}))},
		{name: "values: rejected by the chart's values schema", id: "values-schema", reason: helmv2.InstallFailedReason, inMessage: "replicaCount", note: retriedNothingStored,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.chart(name, b.schema, `{"replicaCount":"two"}`)
			}},

		// Charts.
		{name: "charts: template fails to render", id: "chart-broken-template", reason: helmv2.InstallFailedReason, inMessage: "broken on purpose", note: retriedNothingStored,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease { return b.chart(name, b.broken, "") }},
		{name: "charts: Deployment with a wrong field type (schema validation)", id: "chart-invalid-manifest", reason: helmv2.InstallFailedReason, inMessage: "replicas", stalled: true,
			partial: "the release record it stores before applying, failed, and the objects applied before the invalid one (Helm v4 validates fields server-side, as it applies)",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.chart(name, b.invalid, `{"invalidManifest":true}`)
			}},
		{name: "charts: kind without a CRD", id: "chart-unknown-kind", reason: helmv2.InstallFailedReason, inMessage: "Unicorn", note: retriedNothingStored,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.chart(name, b.invalid, `{"unknownKind":true}`)
			}},

		// Post renderers.
		{name: "post renderers: JSON 6902 patch without a target", id: "postrender-no-target", reason: "InvalidPostRenderers", inMessage: "target", stalled: true,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.PostRenderers = patches(kustomize.Patch{Patch: `[{"op": "add", "path": "/metadata/labels/x", "value": "y"}]`})
				return hr
			}},
		{name: "post renderers: image name that does not compile", id: "postrender-bad-image", accepted: true, reason: helmv2.InstallSucceededReason,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Images: []kustomize.Image{{Name: "ghcr.io/stefanprodan/podinfo[", NewTag: "6.0.0"}}}}}
				return hr
			},
			check: func(ctx context.Context, b *badEnv, hr *v2.HelmRelease) error {
				_, err := env.FindEvent(ctx, b.ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning,
					Reason: "InvalidPostRenderers", Contains: "spec.postRenderers[0].kustomize.images[0].name"})
				return err
			},
			note: "kustomize/api v0.21.2 matches no container with it and changes nothing (v0.21.1 and older panicked, which failed the install, ours and upstream v1.6.4 alike); a Warning InvalidPostRenderers says so"},
		{name: "post renderers: invalid target label selector", id: "postrender-bad-selector", reason: "InvalidPostRenderers", inMessage: "spec.postRenderers[0].kustomize.patches[0].target: labelSelector", stalled: true,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.PostRenderers = patches(kustomize.Patch{Patch: `[{"op": "add", "path": "/metadata/labels/x", "value": "y"}]`,
					Target: &kustomize.Selector{Kind: "Deployment", LabelSelector: "app in (podinfo"}})
				return hr
			}},
		{name: "post renderers: patch that fails on the chart's objects", id: "postrender-patch-fails", reason: helmv2.InstallFailedReason, inMessage: "/spec/nothere", note: retriedNothingStored,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.PostRenderers = patches(kustomize.Patch{Patch: `[{"op": "remove", "path": "/spec/nothere"}]`,
					Target: &kustomize.Selector{Kind: "Deployment"}})
				return hr
			}},

		// Names the API server accepts but that cannot work.
		{name: "names: generated HelmChart name <namespace>-<name> over 253 characters", id: "helmchart-name", reason: helmv2.ArtifactFailedReason,
			inMessage: "must be no more than 253 characters",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.podinfo(name + "-" + strings.Repeat("n", 253-len(b.ns)-len(name)-1))
			}},
		{name: "names: HelmRelease name over 63 characters (HelmChart label value)", id: "label-name", reason: helmv2.ArtifactFailedReason,
			inMessage: "must be no more than 63",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.podinfo(name + "-" + strings.Repeat("l", 64-len(name)))
			}},
		{name: "names: HelmRelease name over 63 characters with chartRef (origin label value)", id: "label-name-ref", reason: helmv2.InstallFailedReason,
			inMessage: "must be no more than 63", stalled: true,
			partial: "the release record it stores before applying, failed (the API server refuses every object: the origin label is too long)",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				return b.chartRef(b.podinfo(name+"-"+strings.Repeat("l", 64-len(name))), sourcev1.OCIRepositoryKind, "podinfo-oci")
			}},
		{name: "names: releaseName that is not a valid Helm release name", id: "release-name-invalid", reason: helmv2.InstallFailedReason, inMessage: "Bad_Release", note: retriedNothingStored,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.ReleaseName = "Bad_Release"
				return hr
			}},

		// Dependencies.
		{name: "dependencies: missing dependency", id: "dep-missing", reason: helmv2.DependencyNotReadyReason, inMessage: "ghost-dependency", event: corev1.EventTypeNormal,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.DependsOn = []v2.DependencyReference{{Name: "ghost-dependency"}}
				return hr
			}},
		{name: "dependencies: two releases depending on each other", id: "dep-cycle-a", reason: helmv2.DependencyNotReadyReason, inMessage: "dep-cycle-b", event: corev1.EventTypeNormal,
			release: func(t *testing.T, b *badEnv, name string) *v2.HelmRelease {
				other := b.podinfo("dep-cycle-b")
				other.Spec.DependsOn = []v2.DependencyReference{{Name: name}}
				env.Create(t, other)
				hr := b.podinfo(name)
				hr.Spec.DependsOn = []v2.DependencyReference{{Name: other.Name}}
				return hr
			},
			check: func(ctx context.Context, b *badEnv, _ *v2.HelmRelease) error {
				other := &v2.HelmRelease{}
				if err := env.Get(ctx, other, b.ns, "dep-cycle-b"); err != nil {
					return err
				}
				if err := framework.Condition(other, meta.ReadyCondition, metav1.ConditionFalse, helmv2.DependencyNotReadyReason); err != nil {
					return fmt.Errorf("the other release of the cycle: %w", err)
				}
				if msg := conditions.GetMessage(other, meta.ReadyCondition); !strings.Contains(msg, "dep-cycle-a") {
					return fmt.Errorf("the other release of the cycle: Ready message %q does not name dep-cycle-a", msg)
				}
				if stored, err := env.ReadStorage(ctx, env.Client, b.ns, "dep-cycle-b"); err != nil || len(stored) > 0 {
					if err != nil {
						return err
					}
					return fmt.Errorf("the other release of the cycle was released: %s", framework.Describe(stored))
				}
				return nil
			}},
		{name: "dependencies: a release depending on itself", id: "dep-self", reason: "InvalidDependency", inMessage: "is the HelmRelease itself", stalled: true,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.DependsOn = []v2.DependencyReference{{Name: name}}
				return hr
			}, note: "no upstream equivalent (upstream waits forever)"},
		{name: "dependencies: readyExpr that is not valid CEL", id: "dep-invalid-cel", reason: meta.InvalidCELExpressionReason, inMessage: "dep.status ==", stalled: true,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.DependsOn = []v2.DependencyReference{{Name: "neighbour", ReadyExpr: "dep.status =="}}
				return hr
			}},

		// Health checks.
		{name: "health checks: healthCheckExprs that is not valid CEL", id: "hc-invalid-cel", reason: meta.InvalidCELExpressionReason, inMessage: "status.phase ==", stalled: true,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{APIVersion: "apps/v1", Kind: "Deployment",
					HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "status.phase =="}}}
				return hr
			}},
		{name: "health checks: healthCheckExprs with an invalid apiVersion", id: "hc-bad-apiversion", accepted: true, reason: helmv2.InstallSucceededReason,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{APIVersion: "a/b/c", Kind: "Deployment",
					HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "false"}}}
				return hr
			},
			check: func(ctx context.Context, b *badEnv, hr *v2.HelmRelease) error {
				_, err := env.FindEvent(ctx, b.ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning,
					Reason: "InvalidHealthCheckExprs", Contains: `healthCheckExprs[0].apiVersion "a/b/c" is not group/version`})
				return err
			},
			note: "as upstream: the apiVersion reads as the core group, so the expression judges no apps/v1 Deployment; a Warning event says so"},
		{name: "health checks: dependsOn readyExpr that errors at runtime", id: "hc-readyexpr-runtime", reason: helmv2.DependencyNotReadyReason, inMessage: "nothere", event: corev1.EventTypeNormal,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.DependsOn = []v2.DependencyReference{{Name: "neighbour", ReadyExpr: "dep.status.nothere == 'x'"}}
				return hr
			}},
		{name: "health checks: healthCheckExprs that errors at runtime", id: "hc-runtime", reason: helmv2.InstallFailedReason, inMessage: "nothere", stalled: true,
			partial: "the release it installed and whose wait failed",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second}
				hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{APIVersion: "apps/v1", Kind: "Deployment",
					HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "status.nothere == 'x'"}}}
				return hr
			}},

		// Clusters and identities.
		{name: "clusters: missing kubeConfig Secret", id: "kubeconfig-missing", reason: "RESTClientError", inMessage: "ghost-kubeconfig",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "ghost-kubeconfig"}}
				return hr
			}},
		{name: "clusters: kubeConfig Secret without the key", id: "kubeconfig-no-key", reason: "RESTClientError", inMessage: "kubeconfig-no-key",
			release: func(t *testing.T, b *badEnv, name string) *v2.HelmRelease {
				b.create(t, secret("kubeconfig-no-key", map[string]string{"config": kubeconfig(t, "https://127.0.0.1:1", false)})(b.ns))
				hr := b.podinfo(name)
				hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kubeconfig-no-key"}}
				return hr
			}},
		{name: "clusters: kubeConfig of an unreachable API server", id: "kubeconfig-unreachable", reason: "StateError", inMessage: "127.0.0.1:1",
			release: func(t *testing.T, b *badEnv, name string) *v2.HelmRelease {
				b.create(t, secret("kubeconfig-unreachable", map[string]string{"value": kubeconfig(t, "https://127.0.0.1:1", false)})(b.ns))
				hr := b.podinfo(name)
				hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kubeconfig-unreachable"}}
				// The release cannot be uninstalled from a cluster that is
				// not there: as upstream, the deletion waits for it. Let the
				// namespace go.
				t.Cleanup(func() { releaseFinalizer(hr) })
				return hr
			}},
		{name: "clusters: kubeConfig that skips TLS verification", id: "kubeconfig-insecure", reason: "StateError", inMessage: "127.0.0.1:1",
			release: func(t *testing.T, b *badEnv, name string) *v2.HelmRelease {
				b.create(t, secret("kubeconfig-insecure", map[string]string{"value": kubeconfig(t, "https://127.0.0.1:1", true)})(b.ns))
				hr := b.podinfo(name)
				hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kubeconfig-insecure"}}
				return hr
			}, note: "as upstream: the setting is left out unless the operator allows it (--insecure-kubeconfig-tls), and the server is then reached with TLS verified"},
		{name: "identities: missing ServiceAccount", id: "sa-missing", reason: "StateError", inMessage: "system:serviceaccount:%s:ghost",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.ServiceAccountName = "ghost"
				return hr
			}},

		// Storage.
		{name: "storage: missing storageNamespace", id: "storage-ns-missing", reason: helmv2.InstallFailedReason, inMessage: "ghost-storage", note: retriedNothingStored,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.StorageNamespace = "ghost-storage"
				return hr
			}},
		{name: "storage: missing targetNamespace without createNamespace", id: "target-ns-missing", reason: helmv2.InstallFailedReason, inMessage: "ghost-target", stalled: true,
			partial: "the release record it stores before applying, failed",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.TargetNamespace = "ghost-target"
				return hr
			}},
		{name: "storage: release too large for a Secret (1.5 MiB of values)", id: "too-large", reason: helmv2.InstallFailedReason, inMessage: "1048576", note: retriedNothingStored,
			release: func(t *testing.T, b *badEnv, name string) *v2.HelmRelease {
				// Two ConfigMaps: one object cannot hold 1.5 MiB either.
				for _, part := range []string{"a", "b"} {
					b.create(t, configMap("big-"+part, map[string]string{"values.yaml": "blob" + part + ": " + randomText(t, 768<<10) + "\n"})(b.ns))
				}
				hr := b.podinfo(name)
				hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "big-a"}, {Kind: "ConfigMap", Name: "big-b"}}
				return hr
			}},

		// Settings.
		{name: "settings: interval of 0s", id: "interval-zero", accepted: true, reason: helmv2.InstallSucceededReason,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.Interval = metav1.Duration{}
				return hr
			}, note: "the CRD pattern admits 0s, as upstream's: installed once, no periodic reconcile"},
		{name: "settings: install timeout of 1ms, one retry, remediateLastFailure", id: "timeout-retry", reason: helmv2.InstallFailedReason,
			inMessage: timedOutAtOnce, stalled: true,
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				yes := true
				hr.Spec.Install = &v2.Install{Install: helmv2.Install{Timeout: &metav1.Duration{Duration: time.Millisecond},
					Remediation: &helmv2.InstallRemediation{Retries: 1, RemediateLastFailure: &yes}}}
				return hr
			},
			// Each attempt applies the chart and its remediation uninstalls
			// it, the last one included: nothing is left once it stalls.
			check: func(ctx context.Context, b *badEnv, hr *v2.HelmRelease) error {
				if hr.Status.InstallFailures != 2 {
					return fmt.Errorf("installFailures %d, want 2 (the install and its retry)", hr.Status.InstallFailures)
				}
				if err := framework.Condition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason); err != nil {
					return err
				}
				return nil
			}, note: "each attempt applies the chart until its wait times out; the uninstall remediation removes it"},
		{name: "settings: install timeout of 1ms, one retry (remediateLastFailure defaults to false)", id: "timeout-retry-keep", reason: helmv2.InstallFailedReason,
			inMessage: timedOutAtOnce, stalled: true,
			partial: "the last failed attempt, as upstream: install remediation leaves the last failure in place unless remediateLastFailure is set",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.Install = &v2.Install{Install: helmv2.Install{Timeout: &metav1.Duration{Duration: time.Millisecond},
					Remediation: &helmv2.InstallRemediation{Retries: 1}}}
				return hr
			},
			check: func(ctx context.Context, b *badEnv, hr *v2.HelmRelease) error {
				if hr.Status.InstallFailures != 2 {
					return fmt.Errorf("installFailures %d, want 2 (the install and its retry)", hr.Status.InstallFailures)
				}
				return nil
			}},
		{name: "settings: timeout of 1ms (default remediation)", id: "timeout-default", reason: helmv2.InstallFailedReason, inMessage: timedOutAtOnce, stalled: true,
			partial: "the failed release (no remediation by default)",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.Timeout = &metav1.Duration{Duration: time.Millisecond}
				return hr
			}},
		{name: "settings: invalid drift detection ignore rule", id: "drift-bad-rule", reason: "DriftDetectionFailed", inMessage: "failed to create ignore rule selector",
			partial: "the installed release, as upstream: drift detection fails only once there is a release to compare (upstream's reason is StateError)",
			release: func(_ *testing.T, b *badEnv, name string) *v2.HelmRelease {
				hr := b.podinfo(name)
				hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled, Ignore: []helmv2.IgnoreRule{{
					Paths: []string{"/spec/replicas"}, Target: &kustomize.Selector{LabelSelector: "app in (podinfo"}}}}
				return hr
			}},
	}
}

// crdRules lists the validation rules of our HelmRelease CRD's spec:
// "<path> enum", "<path> pattern" and "<path> cel[i]", with [] for list
// items.
func crdRules(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "helm.toolkit.fluxcd.io_helmreleases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	var rules []string
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if len(s.Enum) > 0 {
			rules = append(rules, path+" enum")
		}
		if s.Pattern != "" {
			rules = append(rules, path+" pattern")
		}
		for i := range s.XValidations {
			rules = append(rules, fmt.Sprintf("%s cel[%d]", path, i))
		}
		for name, p := range s.Properties {
			walk(path+"."+name, &p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(path+"[]", s.Items.Schema)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(path+"{}", s.AdditionalProperties.Schema)
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == v2.GroupVersion.Version {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			walk("spec", &spec)
		}
	}
	slices.Sort(rules)
	return rules
}

// checkRuleCoverage fails when a rule of the CRD has no case, or a case
// names a rule the CRD does not have.
func checkRuleCoverage(t *testing.T, cases []badCase) {
	t.Helper()
	rules := crdRules(t)
	covered := map[string]bool{}
	for _, c := range cases {
		for _, r := range c.rules {
			if !slices.Contains(rules, r) {
				t.Errorf("case %q names rule %q, which the CRD does not have", c.name, r)
			}
			covered[r] = true
		}
	}
	var missing []string
	for _, r := range rules {
		if !covered[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		t.Errorf("CRD rules without a bad-input case: %v", missing)
	}
	report.add(row{Section: "Bad input", Case: "specs: every enum, pattern and CEL rule of the CRD has a case", Runs: 1,
		Failures: missing, Note: fmt.Sprintf("%d rules", len(rules))})
}

// releaseFinalizer deletes hr and drops its finalizer, for a release whose
// uninstall cannot succeed.
func releaseFinalizer(hr *v2.HelmRelease) {
	ctx := context.Background()
	_ = env.Client.Delete(ctx, hr)
	_ = env.Client.Patch(ctx, hr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
}

// timedOutAtOnce is what a wait of 1 ms says: its watch cannot start in
// that time, and every object is named as upstream names it then
// (kubewait.FromHelmFor).
const timedOutAtOnce = "timeout waiting for: [can't determine status for "
