package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// poll calls check every interval until it reports done. An error from check
// is not fatal: it says why the wait goes on, and is quoted if ctx ends first.
func poll(ctx context.Context, interval time.Duration, check func(context.Context) (bool, error)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var why error
	for {
		done, err := check(ctx)
		if done {
			return nil
		}
		if err != nil {
			why = err
		}
		select {
		case <-ctx.Done():
			if why != nil {
				return fmt.Errorf("%w (last observed: %v)", context.Cause(ctx), why)
			}
			return context.Cause(ctx)
		case <-ticker.C:
		}
	}
}

// httpOK reports whether GET url answers 200. Used for plain-HTTP health
// endpoints (etcd, source-controller) that need no credentials.
func httpOK(ctx context.Context, client *http.Client, url string) (bool, error) {
	return httpAnswers(ctx, client, url, func(status int) bool { return status == http.StatusOK })
}

// httpServes reports whether anything answers HTTP at url, whatever the
// status: the artifact server has no health endpoint, and its root is a 404.
func httpServes(ctx context.Context, client *http.Client, url string) (bool, error) {
	return httpAnswers(ctx, client, url, func(int) bool { return true })
}

// httpAnswers sends GET url and reports whether the status is acceptable.
func httpAnswers(ctx context.Context, client *http.Client, url string, acceptable func(status int) bool) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("building request: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if !acceptable(resp.StatusCode) {
		return false, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return true, nil
}

// probeClient is for health probes: short timeouts, no keep-alive pool that
// would outlive the probe, and no proxy (everything is on 127.0.0.1).
func probeClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
		},
	}
}

// waitAPIServerReady waits for /readyz, which covers etcd and the bootstrap
// post-start hooks (RBAC roles, priority classes, system namespaces).
func waitAPIServerReady(ctx context.Context, client kubernetes.Interface) error {
	return poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			if detail := strings.TrimSpace(string(body)); detail != "" {
				return false, fmt.Errorf("/readyz: %w: %s", err, detail)
			}
			return false, fmt.Errorf("/readyz: %w", err)
		}
		return true, nil
	})
}

// waitDefaultServiceAccount waits for the controller manager to create the
// "default" ServiceAccount: until then the ServiceAccount admission plugin
// rejects every pod in the namespace.
func waitDefaultServiceAccount(ctx context.Context, client kubernetes.Interface) error {
	return poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, errors.New("ServiceAccount default/default does not exist yet")
		}
		return err == nil, err
	})
}

// waitNodesReady waits until every named node is Ready and has no taints;
// the API server taints new nodes not-ready until the node-lifecycle
// controller sees them Ready, and the scheduler skips them until then.
func waitNodesReady(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, name := range names {
		err := poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return nodeUsable(node)
		})
		if err != nil {
			return fmt.Errorf("waiting for node %s: %w", name, err)
		}
	}
	return nil
}

// nodeUsable reports whether pods can be scheduled onto node, and why not.
func nodeUsable(node *corev1.Node) (bool, error) {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false, errors.New("node is not Ready")
	}
	if len(node.Spec.Taints) > 0 {
		return false, fmt.Errorf("node still has taints %v", node.Spec.Taints)
	}
	return true, nil
}
