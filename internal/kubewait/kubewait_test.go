package kubewait

import (
	"io"
	"testing"

	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
)

// optionless hides the options method of the client it embeds.
type optionless struct{ kube.Interface }

// counting records whether it was asked with or without options.
type counting struct {
	*kubefake.PrintingKubeClient
	withOptions, without int
}

func (c *counting) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	c.without++
	return c.PrintingKubeClient.GetWaiter(ws)
}

func (c *counting) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	c.withOptions++
	return c.PrintingKubeClient.GetWaiterWithOptions(ws, opts...)
}

func TestWaiterPassesOptionsWhenTheClientTakesThem(t *testing.T) {
	c := &counting{PrintingKubeClient: &kubefake.PrintingKubeClient{Out: io.Discard, LogOutput: io.Discard}}
	if _, err := Waiter(c, kube.StatusWatcherStrategy, kube.WithKStatusReaders()); err != nil {
		t.Fatal(err)
	}
	if c.withOptions != 1 || c.without != 0 {
		t.Errorf("a client with options asked %d times with, %d without; want 1, 0", c.withOptions, c.without)
	}
	if _, err := Waiter(optionless{c}, kube.StatusWatcherStrategy, kube.WithKStatusReaders()); err != nil {
		t.Fatal(err)
	}
	if c.withOptions != 1 || c.without != 1 {
		t.Errorf("a client without options asked %d times with, %d without; want 1, 1", c.withOptions, c.without)
	}
}
