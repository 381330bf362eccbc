package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestRestartAPIServer: while the API server is down, requests fail; after
// the restart it serves the state it had, and the cluster counts the
// planned exit as healthy.
func TestRestartAPIServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, _ := startCluster(ctx, t, Options{Name: "restart"})
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	restarted := make(chan error, 1)
	go func() { restarted <- c.RestartAPIServer(ctx, 2*time.Second) }()
	waitFor(ctx, t, "the API server to refuse requests", func() (bool, error) {
		_, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		return err != nil, nil
	})
	if err := <-restarted; err != nil {
		t.Fatalf("RestartAPIServer: %v", err)
	}
	got, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("after the restart: %v, %v", got, err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("the cluster counts the restart as a failure: %v", err)
	}
}
