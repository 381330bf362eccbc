package kubewait

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// UntilGone reads the object with live every interval until the one with
// uid no longer exists: live answers NotFound, or an object of the same
// name with another UID (someone else's new one). Any other error is
// taken as passing and read again. It returns ctx's error when ctx ends
// first.
func UntilGone(ctx context.Context, interval time.Duration, uid types.UID, live func(context.Context) (metav1.Object, error)) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		obj, err := live(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		return obj.GetUID() != uid, nil
	})
}
