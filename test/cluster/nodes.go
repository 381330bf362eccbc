package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// nodeCapacity is far more than any test asks for, so resource requests in
// charts never leave a pod Pending for lack of room.
var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("256"),
	corev1.ResourceMemory:           resource.MustParse("1Ti"),
	corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	corev1.ResourcePods:             resource.MustParse("2000"),
}

func nodeName(i int) string {
	return fmt.Sprintf("kwok-node-%d", i)
}

// fakeNode is a node for kwok to play the kubelet of. Capacity is set at
// creation (kubelets register the same way) and kwok keeps what it finds.
func fakeNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    nodeCapacity.DeepCopy(),
			Allocatable: nodeCapacity.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: "linux",
				Architecture:    "amd64",
			},
		},
	}
}

func createNodes(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, name := range names {
		if _, err := client.CoreV1().Nodes().Create(ctx, fakeNode(name), metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	return nil
}
