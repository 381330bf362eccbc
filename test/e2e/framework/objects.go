package framework

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Labels and annotations that tie an applied object to its HelmRelease and
// Helm release: the origin labels the controller sets on every object, and
// Helm's ownership annotation.
const (
	OriginNameLabel       = "helm.toolkit.fluxcd.io/name"
	OriginNamespaceLabel  = "helm.toolkit.fluxcd.io/namespace"
	ReleaseNameAnnotation = "meta.helm.sh/release-name"
)

// ReleaseObjects lists the objects in each namespace of namespaces that a
// release applied, as "Kind/namespace/name": those carrying the origin
// labels of the HelmRelease hrNamespace/hrName, or Helm's ownership
// annotation for release. It covers the kinds charts commonly ship
// (Deployments, StatefulSets, Jobs, Services, ConfigMaps, Secrets other than
// Helm storage, ServiceAccounts), enough to tell whether an install applied
// anything.
func (e *Env) ReleaseObjects(ctx context.Context, hrNamespace, hrName, release string, namespaces ...string) ([]string, error) {
	owned := func(o client.Object) bool {
		l := o.GetLabels()
		if l[OriginNameLabel] == hrName && l[OriginNamespaceLabel] == hrNamespace {
			return true
		}
		return release != "" && o.GetAnnotations()[ReleaseNameAnnotation] == release
	}
	var out []string
	for _, ns := range namespaces {
		lists := map[string]client.ObjectList{
			"Deployment":     &appsv1.DeploymentList{},
			"StatefulSet":    &appsv1.StatefulSetList{},
			"Job":            &batchv1.JobList{},
			"Service":        &corev1.ServiceList{},
			"ConfigMap":      &corev1.ConfigMapList{},
			"Secret":         &corev1.SecretList{},
			"ServiceAccount": &corev1.ServiceAccountList{},
		}
		for kind, list := range lists {
			if err := e.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return nil, fmt.Errorf("listing %ss in %s: %w", kind, ns, err)
			}
			items, err := metaItems(list)
			if err != nil {
				return nil, err
			}
			for _, o := range items {
				if s, ok := o.(*corev1.Secret); ok && s.Type == "helm.sh/release.v1" {
					continue
				}
				if owned(o) {
					out = append(out, kind+"/"+ns+"/"+o.GetName())
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func metaItems(list client.ObjectList) ([]client.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return nil, fmt.Errorf("unexpected item %T in %T", item, list)
		}
		out = append(out, obj)
	}
	return out, nil
}

// SteadyWatch checks a HelmRelease in the background: it must stay Ready
// at one revision and generation the whole time. See WatchSteady.
type SteadyWatch struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	broken []string
	checks int
}

// WatchSteady starts watching hr, which must be Ready at revision now,
// every half second until Stop. Use it for a neighbour that other
// operations in its namespace must leave alone.
func (e *Env) WatchSteady(hr *v2.HelmRelease, revision int) *SteadyWatch {
	w := &SteadyWatch{stop: make(chan struct{}), done: make(chan struct{})}
	generation := hr.Generation
	go func() {
		defer close(w.done)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := e.steady(ctx, hr.Namespace, hr.Name, generation, revision)
			cancel()
			w.mu.Lock()
			w.checks++
			// Each different failure once: the list stays short when a
			// break lasts.
			if err != nil && (len(w.broken) == 0 || w.broken[len(w.broken)-1] != err.Error()) {
				w.broken = append(w.broken, err.Error())
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return w
}

func (e *Env) steady(ctx context.Context, ns, name string, generation int64, revision int) error {
	hr := &v2.HelmRelease{}
	if err := e.Get(ctx, hr, ns, name); err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	if hr.Generation != generation {
		return fmt.Errorf("%s: generation %d, was %d", name, hr.Generation, generation)
	}
	if !conditions.IsTrue(hr, meta.ReadyCondition) {
		return fmt.Errorf("%s: Ready is not True: %s %q", name, Conditions(hr), conditions.GetMessage(hr, meta.ReadyCondition))
	}
	if latest := hr.Status.History.Latest(); latest == nil || latest.Version != revision || latest.Status != "deployed" {
		return fmt.Errorf("%s: history %s, want revision %d deployed", name, Snapshots(hr.Status.History), revision)
	}
	return nil
}

// Stop ends the watch and returns every break seen, in order, and how many
// times the HelmRelease was checked.
func (w *SteadyWatch) Stop() (broken []string, checks int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.broken...), w.checks
}

// FindEvent returns the first event of the HelmRelease ns/name matching
// want, or an error listing the events there are.
func (e *Env) FindEvent(ctx context.Context, ns, name string, want EventWant) (corev1.Event, error) {
	events, err := e.Events(ctx, ns, name)
	if err != nil {
		return corev1.Event{}, err
	}
	var seen []string
	for _, ev := range events {
		if want.matches(ev) {
			return ev, nil
		}
		seen = append(seen, fmt.Sprintf("%s/%s: %.160s", ev.Type, ev.Reason, ev.Message))
	}
	return corev1.Event{}, fmt.Errorf("no %s among %v", want, seen)
}

// deployment reads the Deployment ns/name or fails the test.
func (e *Env) deployment(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := e.Get(context.Background(), d, ns, name); err != nil {
		t.Fatalf("Deployment %s: %v", name, err)
	}
	return d
}

// WantDeploymentReplicas checks the Deployment ns/name asks for replicas
// and has them ready, as it must once its release is Ready.
func (e *Env) WantDeploymentReplicas(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	d := e.deployment(t, ns, name)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Fatalf("Deployment %s replicas %v, want %d", name, d.Spec.Replicas, replicas)
	}
	if d.Status.ReadyReplicas != replicas {
		t.Fatalf("Deployment %s has %d ready replicas after the release was Ready, want %d", name, d.Status.ReadyReplicas, replicas)
	}
}

// WantDeploymentAvailable checks the one-replica Deployment ns/name has
// rolled out its current generation and its replica is available.
func (e *Env) WantDeploymentAvailable(t testing.TB, ns, name string) {
	t.Helper()
	d := e.deployment(t, ns, name)
	if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 1 || d.Status.AvailableReplicas != 1 {
		t.Errorf("Deployment %s not ready: generation %d, status %+v", name, d.Generation, d.Status)
	}
}

// PodTemplateAnnotations returns the pod template annotations of the
// Deployment ns/name.
func (e *Env) PodTemplateAnnotations(t testing.TB, ns, name string) map[string]string {
	t.Helper()
	return e.deployment(t, ns, name).Spec.Template.Annotations
}

// WantSecret checks the Secret ns/name exists.
func (e *Env) WantSecret(t testing.TB, ns, name string) {
	t.Helper()
	if err := e.Get(context.Background(), &corev1.Secret{}, ns, name); err != nil {
		t.Errorf("Secret %s: %v", name, err)
	}
}

// WantNoSecret checks the Secret ns/name was never created (or is gone).
func (e *Env) WantNoSecret(t testing.TB, ns, name string) {
	t.Helper()
	if err := e.Get(context.Background(), &corev1.Secret{}, ns, name); !apierrors.IsNotFound(err) {
		t.Errorf("Secret %s: %v, want it never created", name, err)
	}
}
