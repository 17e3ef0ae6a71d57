package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Metrics are the daemon's Prometheus metrics, on a registry of their own.
type Metrics struct {
	reg             *prometheus.Registry
	ingestSpans     prometheus.Counter
	ingestRequests  prometheus.Counter
	commitRequests  prometheus.Counter
	commitChunks    prometheus.Counter
	commitBytes     prometheus.Counter
	fsyncs          prometheus.Counter
	fsyncDuration   prometheus.Histogram
	requestDuration *prometheus.HistogramVec
}

// NewMetrics creates the metrics; db may be nil (no store gauges).
func NewMetrics(db *storedir.DB) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		ingestSpans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ztsd_ingest_spans_total", Help: "Spans acknowledged."}),
		ingestRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ztsd_ingest_requests_total", Help: "Write requests acknowledged."}),
		commitRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ztsd_commit_requests_total", Help: "Requests committed by the group committer."}),
		commitChunks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ztsd_chunks_written_total", Help: "Chunks appended to data files."}),
		commitBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ztsd_data_bytes_written_total", Help: "Bytes appended to data files (headers included)."}),
		fsyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ztsd_fsyncs_total", Help: "fsync calls on data files made by the write path."}),
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ztsd_fsync_duration_seconds", Help: "Time for the fsyncs of one group commit.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ztsd_request_duration_seconds", Help: "API request latency by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"endpoint"}),
	}
	m.reg.MustRegister(m.ingestSpans, m.ingestRequests, m.commitRequests, m.commitChunks, m.commitBytes,
		m.fsyncs, m.fsyncDuration, m.requestDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if db != nil {
		m.reg.MustRegister(storeCollector{db})
	}
	return m
}

// Registry is where further metrics (OTLP, Zorka) register.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Committed implements storedir.Observer.
func (m *Metrics) Committed(requests, chunks, bytes, syncs int, syncDur time.Duration) {
	m.commitRequests.Add(float64(requests))
	m.commitChunks.Add(float64(chunks))
	m.commitBytes.Add(float64(bytes))
	if syncs > 0 {
		m.fsyncs.Add(float64(syncs))
		m.fsyncDuration.Observe(syncDur.Seconds())
	}
}

var (
	storesDesc = prometheus.NewDesc("ztsd_stores", "Stores in the data directory by state.", []string{"state"}, nil)
	bytesDesc  = prometheus.NewDesc("ztsd_store_bytes", "Bytes on disk per store (data and indexes).", []string{"store"}, nil)
	spansDesc  = prometheus.NewDesc("ztsd_store_spans", "Spans indexed per store.", []string{"store"}, nil)
	lagDesc    = prometheus.NewDesc("ztsd_index_watermark_lag_bytes", "Data-file bytes not yet covered by the metadata index, per store.", []string{"store"}, nil)
	debtDesc   = prometheus.NewDesc("ztsd_index_compaction_debt_bytes", "Bytes the indexes' compactions still have to rewrite, per store: Pebble's estimate, which counts tables in L0 that Pebble compacts only once more arrive, so a store at rest may keep some.", []string{"store"}, nil)
	compDesc   = prometheus.NewDesc("ztsd_index_compactions_running", "Index flushes and compactions running now, all stores (0 once the indexes are at rest; reads are slower while they run).", nil, nil)
	damageDesc = prometheus.NewDesc("ztsd_damaged_chunks_total", "Distinct damaged chunks that reads met and skipped since start (each also logged once).", nil, nil)

	remoteStoresDesc     = prometheus.NewDesc("ztsd_remote_stores", "Stores served from the bucket (cached: with their indexes in the local cache).", []string{"state"}, nil)
	remoteGetsDesc       = prometheus.NewDesc("ztsd_remote_gets_total", "GET requests to the bucket by remote-store reads (whole objects and byte ranges).", nil, nil)
	remoteBytesDesc      = prometheus.NewDesc("ztsd_remote_downloaded_bytes_total", "Bytes downloaded from the bucket by remote-store reads, by kind (index: index and trace-filter files; chunk: ranged reads of data files).", []string{"kind"}, nil)
	remoteCacheDesc      = prometheus.NewDesc("ztsd_remote_cache_requests_total", "Uses of a remote store's indexes, by result (hit: cached; miss: downloaded).", []string{"result"}, nil)
	remoteEvictionsDesc  = prometheus.NewDesc("ztsd_remote_cache_evictions_total", "Remote stores whose cached indexes were evicted (LRU, cache_max_size).", nil, nil)
	remoteCacheBytesDesc = prometheus.NewDesc("ztsd_remote_cache_bytes", "Bytes of remote stores' index files in the local cache.", nil, nil)
)

type storeCollector struct{ db *storedir.DB }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storesDesc
	ch <- bytesDesc
	ch <- spansDesc
	ch <- lagDesc
	ch <- debtDesc
	ch <- compDesc
	ch <- damageDesc
	ch <- remoteStoresDesc
	ch <- remoteGetsDesc
	ch <- remoteBytesDesc
	ch <- remoteCacheDesc
	ch <- remoteEvictionsDesc
	ch <- remoteCacheBytesDesc
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	states := map[string]int{"open": 0, "sealed": 0}
	var compactions int64
	for _, in := range c.db.Stores() {
		states[in.State]++
		name := in.ID
		if in.Node != "" {
			name = in.Node + "/" + in.ID // a remote store: ids collide across nodes
		}
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(in.Bytes), name)
		ch <- prometheus.MustNewConstMetric(spansDesc, prometheus.GaugeValue, float64(in.Spans), name)
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(in.IndexLag), name)
		ch <- prometheus.MustNewConstMetric(debtDesc, prometheus.GaugeValue, float64(in.IndexCompactionDebt), name)
		compactions += in.IndexCompactions
	}
	ch <- prometheus.MustNewConstMetric(compDesc, prometheus.GaugeValue, float64(compactions))
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(storesDesc, prometheus.GaugeValue, float64(n), st)
	}
	ch <- prometheus.MustNewConstMetric(damageDesc, prometheus.CounterValue, float64(c.db.DamagedChunks()))
	rs := c.db.RemoteStats()
	ch <- prometheus.MustNewConstMetric(remoteStoresDesc, prometheus.GaugeValue, float64(rs.Stores), "served")
	ch <- prometheus.MustNewConstMetric(remoteStoresDesc, prometheus.GaugeValue, float64(rs.Cached), "cached")
	ch <- prometheus.MustNewConstMetric(remoteGetsDesc, prometheus.CounterValue, float64(rs.GETs))
	ch <- prometheus.MustNewConstMetric(remoteBytesDesc, prometheus.CounterValue, float64(rs.IndexBytes), "index")
	ch <- prometheus.MustNewConstMetric(remoteBytesDesc, prometheus.CounterValue, float64(rs.ChunkBytes), "chunk")
	ch <- prometheus.MustNewConstMetric(remoteCacheDesc, prometheus.CounterValue, float64(rs.CacheHits), "hit")
	ch <- prometheus.MustNewConstMetric(remoteCacheDesc, prometheus.CounterValue, float64(rs.CacheMisses), "miss")
	ch <- prometheus.MustNewConstMetric(remoteEvictionsDesc, prometheus.CounterValue, float64(rs.CacheEvictions))
	ch <- prometheus.MustNewConstMetric(remoteCacheBytesDesc, prometheus.GaugeValue, float64(rs.CacheBytes))
}

// IngestCounter wraps a span appender (the OTLP handlers) so that what it
// stores is counted in ztsd_ingest_spans_total and
// ztsd_ingest_requests_total like the native write path.
type IngestCounter struct {
	Appender interface {
		Append(ctx context.Context, spans []*trace.Span) error
	}
	Metrics *Metrics
}

// Append appends and counts on success.
func (c IngestCounter) Append(ctx context.Context, spans []*trace.Span) error {
	if err := c.Appender.Append(ctx, spans); err != nil {
		return err
	}
	c.Metrics.ingestSpans.Add(float64(len(spans)))
	c.Metrics.ingestRequests.Inc()
	return nil
}
