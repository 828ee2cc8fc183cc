package deploytest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"
)

// promQL is the PromQL parser, configured as Prometheus's defaults are.
var promQL = parser.NewParser(parser.Options{})

// memStorage holds a unit test's input series, as promtool's `load` would.
// It is all the engine needs: a Queryable that selects series by matchers.
type memStorage struct {
	series []storage.Series
}

// load adds a series in promtool's notation: `metric{l="v"}` and
// `0+1x10 _ 5 stale`, one sample per interval from time 0.
func (m *memStorage) load(t *testing.T, series, values string, interval time.Duration) {
	t.Helper()
	lset, vals, err := promQL.ParseSeriesDesc(series + " " + values)
	require.NoError(t, err, "input series %s", series)
	var samples []chunks.Sample
	for i, v := range vals {
		if v.Omitted {
			continue
		}
		require.Nil(t, v.Histogram, "histogram samples are not supported here")
		samples = append(samples, fSample{t: int64(i) * interval.Milliseconds(), f: v.Value})
	}
	m.series = append(m.series, storage.NewListSeries(lset, samples))
}

func (m *memStorage) Querier(int64, int64) (storage.Querier, error) { return m, nil }

func (m *memStorage) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range m.series {
		lset := s.Labels()
		if matchesAll(lset, ms) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &seriesSet{series: out, i: -1}
}

func matchesAll(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (m *memStorage) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (m *memStorage) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (m *memStorage) Close() error { return nil }

type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// fSample is one float sample.
type fSample struct {
	t int64
	f float64
}

func (s fSample) T() int64                      { return s.t }
func (s fSample) ST() int64                     { return 0 }
func (s fSample) F() float64                    { return s.f }
func (s fSample) H() *histogram.Histogram       { return nil }
func (s fSample) FH() *histogram.FloatHistogram { return nil }
func (s fSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fSample) Copy() chunks.Sample           { return s }

// newEngine returns a PromQL engine with Prometheus's default lookback.
func newEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{
		MaxSamples:    50_000_000,
		Timeout:       time.Minute,
		LookbackDelta: 5 * time.Minute,
		Parser:        promQL,
	})
}

// instant evaluates expr at ts over q and returns its vector.
func instant(ctx context.Context, ng *promql.Engine, q storage.Queryable, expr string, ts time.Time) (promql.Vector, error) {
	qry, err := ng.NewInstantQuery(ctx, q, nil, expr, ts)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return v, nil
	case promql.Scalar:
		return promql.Vector{promql.Sample{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
	default:
		return nil, &unexpectedResult{expr: expr, typ: string(res.Value.Type())}
	}
}

type unexpectedResult struct{ expr, typ string }

func (e *unexpectedResult) Error() string {
	return e.expr + ": result is a " + e.typ + ", not a vector"
}
