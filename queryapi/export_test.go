package queryapi

// ProtoWriterBuffer is the capacity of the span buffer p holds.
func ProtoWriterBuffer(p *ProtoWriter) int { return cap(p.buf) }
