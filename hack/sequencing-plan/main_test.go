package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

const chartDir = "../../test/e2e/framework/charts/sequencing-packaged"

// The plan of the packaged-chart fixture, read from its directory, where
// Chart.yaml still has everything.
const wantPlan = `chart sequencing-packaged, release shop in namespace apps: 5 batches
1. db/server, waited for
   StatefulSet/shop-db
2. db/info (after 1, ready), waited for
   ConfigMap/shop-db-info
3. api/migrate (after 2, ready), waited for
   Job/shop-api-migrate
4. api/done (after 3, ready), waited for
   ConfigMap/shop-api-info
5. unsequenced (after 4, ready), not waited for
   Deployment/shop-app
`

func TestPrintsThePlan(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-name", "shop", "-namespace", "apps", "-strict", chartDir}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != wantPlan {
		t.Errorf("output\n%s\nwant\n%s", out.String(), wantPlan)
	}
}

// The same chart written without the annotations, with HIP-0025's
// depends-on fields only, then packaged as `helm package` does: the order
// is lost, and the dry run says so (failing with -strict).
func TestWarnsOfAnOrderLostInPackaging(t *testing.T) {
	chrt, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	delete(chrt.Metadata.Annotations, "helm.sh/depends-on/subcharts")
	delete(chrt.Metadata.Annotations, "helm.sh/depends-on/dependencies")
	archive, err := chartutil.Save(chrt, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{archive}, &out); err != nil {
		t.Fatal(err)
	}
	// Side by side: the migration is no longer after the database.
	if !strings.Contains(out.String(), "api/migrate, waited for") {
		t.Errorf("output\n%s\nwant api/migrate without predecessors", out.String())
	}
	if !strings.Contains(out.String(), `warnings:
- chart sequencing-packaged: subchart(s) "api", "db" order their resources with resource groups, but Chart.yaml declares no order`) {
		t.Errorf("output\n%s\nwant the lost order warning", out.String())
	}
	err = run(context.Background(), []string{"-strict", archive}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "warnings") {
		t.Errorf("-strict: %v, want a failure for the warning", err)
	}
}

func TestFailsOnACycle(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", "apiVersion: v2\nname: loop\nversion: 0.1.0\n")
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  annotations:\n    helm.sh/resource-group: %s\n    helm.sh/depends-on/resource-groups: '[\"%s\"]'\n"
	write("templates/a.yaml", fmt.Sprintf(cm, "a", "a", "b"))
	write("templates/b.yaml", fmt.Sprintf(cm, "b", "b", "a"))
	err := run(context.Background(), []string{dir}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("error %v, want the cycle", err)
	}
}
