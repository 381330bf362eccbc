package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const pollInterval = 250 * time.Millisecond

// newNamespace creates a namespace that is deleted when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(fmt.Sprintf("%.40s-%s", strings.ReplaceAll(t.Name(), "/", "-"), rand.String(5)))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), ns) })
	return name
}

// eventually polls check until it returns nil or the timeout passes, then
// fails the test with the last error. It also fails fast if the controller died.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		if err := env.controller.running(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if last = check(ctx); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not true after %s: %v", what, timeout, last)
		case <-time.After(pollInterval):
		}
	}
}

// consistently fails the test if check returns an error at any poll during d.
func consistently(t *testing.T, d time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	// The window's end must not cut short a check in flight: each check
	// gets its own time limit, independent of the window.
	end := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(pollInterval)
	}
}

// get fetches obj by key into obj.
func get(ctx context.Context, obj client.Object, namespace, name string) error {
	return env.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
}

// readyTrue returns nil when obj's Ready condition is True for its current generation.
func readyTrue(obj conditions.Getter) error {
	c := conditions.Get(obj, meta.ReadyCondition)
	if c == nil {
		return fmt.Errorf("no Ready condition yet")
	}
	if c.Status != metav1.ConditionTrue {
		return fmt.Errorf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return nil
}

// gone returns nil once the object no longer exists.
func gone(ctx context.Context, obj client.Object) error {
	err := env.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still exists (finalizers %v, deletionTimestamp %v)", obj.GetName(), obj.GetFinalizers(), obj.GetDeletionTimestamp())
}
