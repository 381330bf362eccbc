package bench

import (
	"context"
	"fmt"
	"time"
)

// pollEvery calls check every interval until it reports done or fails.
// Unlike an error, false with a nil error means "not yet". ctx bounds the
// loop; when it ends first, the error says so.
func pollEvery(ctx context.Context, interval time.Duration, check func(context.Context) (bool, error)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		done, err := check(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ticker.C:
		}
	}
}

// sleep waits for d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
		return nil
	}
}

// withTimeout is context.WithTimeoutCause with a cause that names what was
// being waited for, so a timeout reads as such in the final error.
func withTimeout(ctx context.Context, timeout time.Duration, what string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s: not done within %s", what, timeout))
}
