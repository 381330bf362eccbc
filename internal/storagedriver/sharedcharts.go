package storagedriver

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"reflect"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// chartDigest identifies a chart by what makes up most of its size (its
// name, version, templates, files and schema). Two charts with one digest
// are shared only if they are equal in everything else too.
type chartDigest [sha256.Size]byte

// sharedChart is one chart kept for every cached record that carries an
// equal chart.
type sharedChart struct {
	chart *chartv2.Chart
	// refs counts the cached records that hold chart.
	refs int
	// cost is what chart is counted against the budget, once.
	cost int
}

// shareChart gives rls the chart kept for an equal one, or keeps rls's
// chart for the records to come. It returns the chart's digest and the
// part of the record's cost that is its chart's. A fleet of releases of
// one chart (every podinfo of a team) then costs one chart and a manifest
// and values each, instead of a chart each: a podinfo record is about
// 100 KiB of JSON, of which the chart is 87.
func (d *Decoded) shareChart(rls *releasev1.Release) (chartDigest, int, bool) {
	if rls.Chart == nil {
		return chartDigest{}, 0, false
	}
	key := digestChart(rls.Chart)
	if kept, ok := d.charts[key]; ok {
		if !reflect.DeepEqual(kept.chart, rls.Chart) {
			return chartDigest{}, 0, false
		}
		rls.Chart = kept.chart
		kept.refs++
		return key, kept.cost, true
	}
	cost := chartCost(rls.Chart)
	d.charts[key] = &sharedChart{chart: rls.Chart, refs: 1, cost: cost}
	d.size += cost
	return key, cost, true
}

// releaseChart drops a record's hold on the chart under key, and the
// chart once no record holds it.
func (d *Decoded) releaseChart(key chartDigest) {
	kept, ok := d.charts[key]
	if !ok {
		return
	}
	kept.refs--
	if kept.refs > 0 {
		return
	}
	delete(d.charts, key)
	d.size -= kept.cost
}

func digestChart(c *chartv2.Chart) chartDigest {
	h := sha256.New()
	if c.Metadata != nil {
		writeField(h, []byte(c.Metadata.Name))
		writeField(h, []byte(c.Metadata.Version))
	}
	for _, files := range [][]*common.File{c.Templates, c.Files} {
		writeLength(h, len(files))
		for _, f := range files {
			if f == nil {
				writeField(h, nil)
				continue
			}
			writeField(h, []byte(f.Name))
			writeField(h, f.Data)
		}
	}
	writeField(h, c.Schema)
	var key chartDigest
	h.Sum(key[:0])
	return key
}

// writeField writes b with its length, so that no two lists of fields
// write the same bytes.
func writeField(h hash.Hash, b []byte) {
	writeLength(h, len(b))
	h.Write(b)
}

func writeLength(h hash.Hash, n int) {
	var buf [binary.MaxVarintLen64]byte
	h.Write(buf[:binary.PutUvarint(buf[:], uint64(n))])
}

// chartCost is about what c takes of a record's JSON: its templates,
// files and schema, base64-encoded as the record holds them, and its
// values. It is reckoned once per chart kept.
func chartCost(c *chartv2.Chart) int {
	n := base64Len(len(c.Schema))
	if values, err := json.Marshal(c.Values); err == nil {
		n += len(values)
	}
	for _, files := range [][]*common.File{c.Templates, c.Files} {
		for _, f := range files {
			if f != nil {
				n += len(f.Name) + base64Len(len(f.Data))
			}
		}
	}
	return n
}

func base64Len(n int) int { return (n + 2) / 3 * 4 }
