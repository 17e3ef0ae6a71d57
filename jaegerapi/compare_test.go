package jaegerapi_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Responses of jaeger-query and of ztsd are compared after normalising
// the parts whose order carries no meaning: spans are keyed by span id,
// tags, log fields and OTLP attributes by key, references by type and
// span id, traces by trace id, processes inlined into their spans, OTLP
// resource and scope inlined into each span. What remains is compared
// value by value, and each difference is reported by its path.

func normalize(endpoint string, body []byte) (any, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("%s: %v in %s", endpoint, err, body)
	}
	switch {
	case strings.HasPrefix(endpoint, "/api/v3/traces"):
		return normV3(v), nil
	case strings.HasPrefix(endpoint, "/api/traces"):
		return normTraces(v), nil
	case strings.HasPrefix(endpoint, "/api/v3/services"), strings.HasPrefix(endpoint, "/api/v3/operations"),
		strings.Contains(endpoint, "operations"), strings.HasPrefix(endpoint, "/api/services"):
		return sortLists(v), nil
	}
	return v, nil
}

// sortLists sorts every list of strings or of objects (by their JSON).
func sortLists(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = sortLists(e)
		}
	case []any:
		for i, e := range x {
			x[i] = sortLists(e)
		}
		sort.Slice(x, func(i, j int) bool {
			a, _ := json.Marshal(x[i])
			b, _ := json.Marshal(x[j])
			return string(a) < string(b)
		})
	}
	return v
}

func keyed(list any, key func(map[string]any) string) map[string]any {
	out := map[string]any{}
	l, _ := list.([]any)
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			out[fmt.Sprint(i)] = e
			continue
		}
		k := key(m)
		for out[k] != nil {
			k += "'"
		}
		out[k] = m
	}
	return out
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func kvs(list any) map[string]any {
	return keyed(list, func(m map[string]any) string { return str(m, "key") })
}

func normTraces(v any) any {
	top, ok := v.(map[string]any)
	if !ok {
		return v
	}
	top["data"] = keyed(top["data"], func(tr map[string]any) string {
		procs, _ := tr["processes"].(map[string]any)
		for _, p := range procs {
			if pm, ok := p.(map[string]any); ok {
				pm["tags"] = kvs(pm["tags"])
			}
		}
		tr["spans"] = keyed(tr["spans"], func(sp map[string]any) string {
			sp["tags"] = kvs(sp["tags"])
			sp["references"] = keyed(sp["references"], func(r map[string]any) string { return str(r, "refType") + " " + str(r, "spanID") })
			if logs, ok := sp["logs"].([]any); ok {
				for _, l := range logs {
					if lm, ok := l.(map[string]any); ok {
						lm["fields"] = kvs(lm["fields"])
					}
				}
			}
			sp["process"] = procs[str(sp, "processID")]
			delete(sp, "processID")
			return str(sp, "spanID")
		})
		delete(tr, "processes")
		return str(tr, "traceID")
	})
	return top
}

func normV3(v any) any {
	top, ok := v.(map[string]any)
	if !ok {
		return v
	}
	res, ok := top["result"].(map[string]any)
	if !ok {
		return v
	}
	spans := map[string]any{}
	rss, _ := res["resourceSpans"].([]any)
	for _, rs := range rss {
		rsm, _ := rs.(map[string]any)
		resource, _ := rsm["resource"].(map[string]any)
		if resource != nil {
			resource["attributes"] = kvs(resource["attributes"])
		}
		sss, _ := rsm["scopeSpans"].([]any)
		for _, ss := range sss {
			ssm, _ := ss.(map[string]any)
			scope := ssm["scope"]
			list, _ := ssm["spans"].([]any)
			for _, sp := range list {
				spm, _ := sp.(map[string]any)
				spm["attributes"] = kvs(spm["attributes"])
				if evs, ok := spm["events"].([]any); ok {
					for _, e := range evs {
						if em, ok := e.(map[string]any); ok {
							em["attributes"] = kvs(em["attributes"])
						}
					}
				}
				if ls, ok := spm["links"].([]any); ok {
					for _, l := range ls {
						if lm, ok := l.(map[string]any); ok {
							lm["attributes"] = kvs(lm["attributes"])
						}
					}
				}
				spm["resource"] = resource
				spm["scope"] = scope
				spans[str(spm, "traceId")+"/"+str(spm, "spanId")] = spm
			}
		}
	}
	return map[string]any{"spans": spans}
}

// diff lists the paths where a and b differ ("path: jaeger=…, ztsd=…").
func diff(path string, a, b any, out *[]string) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: jaeger=%s ztsd=%s", path, short(a), short(b)))
			return
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			av, aok := x[k]
			bv, bok := y[k]
			switch {
			case !aok:
				*out = append(*out, fmt.Sprintf("%s.%s: jaeger=(absent) ztsd=%s", path, k, short(bv)))
			case !bok:
				*out = append(*out, fmt.Sprintf("%s.%s: jaeger=%s ztsd=(absent)", path, k, short(av)))
			default:
				diff(path+"."+k, av, bv, out)
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			*out = append(*out, fmt.Sprintf("%s: jaeger=%s ztsd=%s", path, short(a), short(b)))
			return
		}
		for i := range x {
			diff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], out)
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			*out = append(*out, fmt.Sprintf("%s: jaeger=%s ztsd=%s", path, short(a), short(b)))
		}
	}
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 160 {
		return string(b[:160]) + "…"
	}
	return string(b)
}
