package atf

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// MaxManifestSize bounds manifest.json; a larger file is not read.
const MaxManifestSize = 64 << 20

// Manifest is the tracer session's manifest.json. Only the symbol table is
// trusted: the writer produces it before finalising the thread files, so its
// thread list and time range are unreliable (has_detail is always true, the
// times are always 0).
type Manifest struct {
	Threads       []ManifestThread `json:"threads"`
	TimeStartNS   uint64           `json:"time_start_ns"`
	TimeEndNS     uint64           `json:"time_end_ns"`
	ClockType     int              `json:"clock_type"`
	Modules       []ManifestModule `json:"modules"`
	Symbols       []ManifestSymbol `json:"symbols"`
	FormatVersion string           `json:"format_version"`
}

// ManifestThread is one entry of "threads".
type ManifestThread struct {
	ID        uint32 `json:"id"`
	HasDetail bool   `json:"has_detail"`
}

// ManifestModule is one entry of "modules".
type ManifestModule struct {
	ModuleID    uint32 `json:"module_id"`
	Path        string `json:"path"`
	BaseAddress string `json:"base_address"`
	Size        uint64 `json:"size"`
	UUID        string `json:"uuid"`
}

// ManifestSymbol is one entry of "symbols".
type ManifestSymbol struct {
	FunctionID  string `json:"function_id"` // "0x%016x"
	ModuleID    uint32 `json:"module_id"`
	SymbolIndex uint32 `json:"symbol_index"`
	Name        string `json:"name"`
}

// ParseManifest decodes manifest.json.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("manifest: %d bytes, limit %d", len(data), MaxManifestSize)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return &m, nil
}

// Symbol is what a function id resolves to.
type Symbol struct {
	Name   string
	Module string // module path, "" when unknown
}

// SymbolTable maps function ids to names.
type SymbolTable map[uint64]Symbol

// SymbolTable builds the function-id table. A symbol whose function_id
// string does not parse falls back to module_id << 32 | symbol_index.
func (m *Manifest) SymbolTable() SymbolTable {
	if m == nil {
		return nil
	}
	modules := make(map[uint32]string, len(m.Modules))
	for _, mod := range m.Modules {
		modules[mod.ModuleID] = mod.Path
	}
	t := make(SymbolTable, len(m.Symbols))
	for _, s := range m.Symbols {
		id, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s.FunctionID, "0x"), "0X"), 16, 64)
		if err != nil {
			id = uint64(s.ModuleID)<<32 | uint64(s.SymbolIndex)
		}
		t[id] = Symbol{Name: s.Name, Module: modules[uint32(id>>32)]}
	}
	return t
}
