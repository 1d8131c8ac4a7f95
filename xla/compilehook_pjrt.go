//go:build !noxla

package xla

/*
#include <stdlib.h>
#include "pjrt_abi.h"
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"

	"github.com/gotpu/gotpu/xla/compilecache"
)

// How the compilation cache reaches the compiler.
//
// GoMLX v0.26 compiles inside its XLA backend (Builder.Compile calls go-xla's
// Client.Compile().Done()), with no hook, and go-xla v0.1.4 has no call for
// PJRT_Executable_Serialize or PJRT_Executable_DeserializeAndLoad. Every go-xla call into a plugin
// goes through the plugin's PJRT_Api table, which go-xla reads from its Plugin's api field. So
// gotpu gives go-xla a copy of that table whose PJRT_Client_Compile is a trampoline into
// compileHook (compilehook_pjrt.c): for a client a Runtime registered, a cache hit answers the
// compile with PJRT_Executable_DeserializeAndLoad of the stored executable, and a miss compiles
// with the plugin's own entry and stores PJRT_Executable_Serialize's bytes. GoMLX and go-xla then
// see an ordinary PJRT_LoadedExecutable either way, so execution, donation and sharding are
// untouched. Clients no Runtime registered (other code in the process using go-xla directly)
// compile exactly as before.
//
// The registry is process-wide because the table it patches is: a plugin is loaded once per
// process and go-xla shares it between clients.
type compileHooks struct {
	openMu  sync.Mutex // held by openPJRT around loading a plugin and hooking it
	mu      sync.Mutex
	plugins map[uintptr]*hookedPlugin // by go-xla *pjrt.Plugin
	slots   [C.GOTPU_HOOK_SLOTS]*hookedPlugin
	clients map[uintptr]*compileBinding // by PJRT_Client*
}

var hooks = &compileHooks{plugins: map[uintptr]*hookedPlugin{}, clients: map[uintptr]*compileBinding{}}

// hookedPlugin is a plugin whose table go-xla now reads from gotpu's copy.
type hookedPlugin struct {
	slot  C.int
	orig  *C.gotpu_PJRT_Api // the plugin's own table: serialization and loading go through it
	table *C.gotpu_PJRT_Api // gotpu's copy, with the trampoline
}

// compileBinding is one Runtime's client: its cache (nil when off), the key parts its programs
// share, and its counters.
type compileBinding struct {
	plugin  *hookedPlugin
	client  unsafe.Pointer
	store   *compilecache.Store
	keyBase []compilecache.KeyField
	log     *slog.Logger

	mu    sync.Mutex
	stats CompileStats
}

// errHookUnavailable says why a plugin could not be hooked; the runtime then works without
// compile figures or cache (a warning names the reason).
var errHookUnavailable = errors.New("the PJRT compile hook is unavailable")

// installCompileHook hooks the plugin behind be (once per plugin) and registers be's client with
// store (nil: figures only). Callers hold no lock; the registry's mutex serialises installs.
func installCompileHook(be *gomlxxla.Backend, store *compilecache.Store, keyBase []compilecache.KeyField, log *slog.Logger) (*compileBinding, error) {
	client, err := pjrtClientOf(be)
	if err != nil {
		return nil, err
	}
	cClient, err := cClientOf(client)
	if err != nil {
		return nil, err
	}
	pl := client.Plugin()
	if pl == nil {
		return nil, fmt.Errorf("%w: the client has no plugin", errHookUnavailable)
	}
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	hp, err := hooks.hook(pl)
	if err != nil {
		return nil, err
	}
	b := &compileBinding{plugin: hp, client: cClient, store: store, keyBase: keyBase, log: log}
	if store != nil {
		b.stats.CacheDir = store.Dir()
	}
	hooks.clients[uintptr(cClient)] = b
	return b, nil
}

// release unregisters b's client (the runtime is closing; the client's address may be reused).
func (b *compileBinding) release() {
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if hooks.clients[uintptr(b.client)] == b {
		delete(hooks.clients, uintptr(b.client))
	}
}

// hook swaps pl's table for gotpu's copy, once. hooks.mu is held.
func (h *compileHooks) hook(pl *pjrt.Plugin) (*hookedPlugin, error) {
	if hp, ok := h.plugins[uintptr(unsafe.Pointer(pl))]; ok {
		return hp, nil
	}
	f := reflect.ValueOf(pl).Elem().FieldByName("api")
	if !f.IsValid() || f.Kind() != reflect.Pointer || !f.CanAddr() {
		return nil, fmt.Errorf("%w: go-xla's Plugin no longer keeps its PJRT_Api table in the field gotpu reads", errHookUnavailable)
	}
	api := (*C.gotpu_PJRT_Api)(f.UnsafePointer())
	if api == nil {
		return nil, fmt.Errorf("%w: the plugin's PJRT_Api table is nil", errHookUnavailable)
	}
	if api.pjrt_api_version.major_version != 0 {
		return nil, fmt.Errorf("%w: PJRT C API %d.%d (gotpu knows major version 0)", errHookUnavailable,
			api.pjrt_api_version.major_version, api.pjrt_api_version.minor_version)
	}
	need := C.size_t(C.GOTPU_PJRT_API_FN_OFFSET) + C.GOTPU_PJRT_FN_NEEDED*C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))
	if api.struct_size < need {
		return nil, fmt.Errorf("%w: the plugin's table has %d bytes, fewer than the %d the cache needs (PJRT C API %d.%d)",
			errHookUnavailable, api.struct_size, need, api.pjrt_api_version.major_version, api.pjrt_api_version.minor_version)
	}
	slot := -1
	for i, s := range h.slots {
		if s == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("%w: more than %d plugins loaded in one process", errHookUnavailable, len(h.slots))
	}
	table := C.gotpu_hook_install(api, C.int(slot))
	if table == nil {
		return nil, fmt.Errorf("%w: allocating the table copy", errHookUnavailable)
	}
	// go-xla reads the field on every call: write it through its address with its own type. No
	// other goroutine uses this plugin yet when a Runtime opens it first (openPJRT holds
	// hooks.mu around the load and the swap), so the write races with nothing.
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.NewAt(f.Type().Elem(), unsafe.Pointer(table)))
	hp := &hookedPlugin{slot: C.int(slot), orig: api, table: table}
	h.slots[slot] = hp
	h.plugins[uintptr(unsafe.Pointer(pl))] = hp
	return hp, nil
}

// pjrtClientOf is the go-xla client behind GoMLX's XLA backend (unexported field client; the
// hop checks its name and type, as compileTextStats does).
func pjrtClientOf(be *gomlxxla.Backend) (*pjrt.Client, error) {
	cv, ok := unexportedField(reflect.ValueOf(be), "client", reflect.TypeFor[*pjrt.Client]())
	if !ok {
		return nil, fmt.Errorf("%w: GoMLX's XLA backend no longer keeps its PJRT client in the field gotpu reads", errHookUnavailable)
	}
	c, _ := cv.Interface().(*pjrt.Client)
	if c == nil {
		return nil, fmt.Errorf("%w: the PJRT client was released", errHookUnavailable)
	}
	return c, nil
}

// cClientOf is the PJRT_Client* go-xla passes to the plugin (Client.client.c).
func cClientOf(c *pjrt.Client) (unsafe.Pointer, error) {
	w := reflect.ValueOf(c).Elem().FieldByName("client")
	if !w.IsValid() || w.Kind() != reflect.Pointer || w.IsNil() || w.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: go-xla's Client no longer keeps its C client in the field gotpu reads", errHookUnavailable)
	}
	p := w.Elem().FieldByName("c")
	if !p.IsValid() || p.Kind() != reflect.Pointer || p.IsNil() {
		return nil, fmt.Errorf("%w: go-xla's client wrapper no longer keeps its PJRT_Client in the field gotpu reads", errHookUnavailable)
	}
	return p.UnsafePointer(), nil
}

//export gotpuCompileHook
func gotpuCompileHook(slot C.int, args *C.gotpu_PJRT_Client_Compile_Args) unsafe.Pointer {
	hooks.mu.Lock()
	b := hooks.clients[uintptr(args.client)]
	hooks.mu.Unlock()
	if b == nil || b.plugin.slot != slot {
		return C.gotpu_compile_orig(slot, args)
	}
	return b.compile(args)
}

// compile answers one PJRT_Client_Compile: from the cache, else with the plugin's compiler (and
// then into the cache). Nothing the cache does can fail the compile: any problem is a warning and
// the program is compiled.
func (b *compileBinding) compile(args *C.gotpu_PJRT_Client_Compile_Args) unsafe.Pointer {
	start := time.Now()
	var key compilecache.Key
	if b.store != nil {
		var hit bool
		key, hit = b.lookup(args)
		if hit {
			d := time.Since(start)
			b.mu.Lock()
			b.stats.CacheHits++
			b.stats.LoadSeconds += d.Seconds()
			b.mu.Unlock()
			return nil
		}
	}
	cerr := C.gotpu_compile_orig(b.plugin.slot, args)
	d := time.Since(start)
	if cerr != nil {
		return cerr
	}
	b.mu.Lock()
	b.stats.Compiles++
	b.stats.CompileSeconds += d.Seconds()
	if b.store != nil {
		b.stats.CacheMisses++
	}
	b.mu.Unlock()
	if b.store != nil {
		b.save(key, args.executable, d)
	}
	return nil
}

// lookup computes the program's key and loads a stored executable into args.executable.
func (b *compileBinding) lookup(args *C.gotpu_PJRT_Client_Compile_Args) (key compilecache.Key, hit bool) {
	defer func() {
		if v := recover(); v != nil {
			b.log.Warn("compilation cache: lookup failed, compiling", "error", fmt.Sprint(v))
			hit = false
		}
	}()
	start := time.Now()
	key = b.key(args)
	keyed := time.Now()
	payload, e, ok := b.store.Get(key)
	if !ok {
		return key, false
	}
	read := time.Now()
	var loaded unsafe.Pointer
	var p *C.char
	if len(payload) > 0 {
		p = (*C.char)(unsafe.Pointer(&payload[0]))
	}
	if cerr := C.gotpu_deserialize_and_load(b.plugin.orig, args.client, p, C.size_t(len(payload)), &loaded); cerr != nil {
		b.mu.Lock()
		b.stats.CacheErrors++
		b.mu.Unlock()
		b.log.Warn("compilation cache: the plugin refused a stored executable, compiling", "file", e.Path,
			"error", b.plugin.takeError(cerr))
		return key, false
	}
	args.executable = loaded
	b.log.Debug("compilation cache: hit", "file", e.Path, "name", e.Name, "bytes", len(payload),
		"key_seconds", keyed.Sub(start).Seconds(), "read_seconds", read.Sub(keyed).Seconds(),
		"deserialize_seconds", time.Since(read).Seconds())
	return key, true
}

// save stores the executable loaded (a fresh compile of key). A plugin that cannot serialize, a
// full disk or an oversized executable cost only the cache entry: a warning, once per cause.
func (b *compileBinding) save(key compilecache.Key, loaded unsafe.Pointer, took time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			b.log.Warn("compilation cache: storing the executable failed", "error", fmt.Sprint(v))
		}
	}()
	payload, name, err := b.plugin.serialize(loaded)
	if err == nil {
		_, err = b.store.Put(key, payload, compilecache.Meta{Name: name, CompileSeconds: took.Seconds()})
	}
	b.mu.Lock()
	if err != nil {
		b.stats.CacheErrors++
	} else {
		b.stats.CacheWrites++
	}
	b.mu.Unlock()
	if err != nil {
		b.log.Warn("compilation cache: the executable was not stored", "error", err)
		return
	}
	b.log.Debug("compilation cache: stored", "name", name, "bytes", len(payload), "compile_seconds", took.Seconds())
}

// key is everything that changes what the plugin compiles: the binding's parts (plugin, devices,
// gotpu) and the program's own (its bytes, format and compile options, hashed).
func (b *compileBinding) key(args *C.gotpu_PJRT_Client_Compile_Args) compilecache.Key {
	prog := args.program
	code := unsafe.Slice((*byte)(unsafe.Pointer(prog.code)), int(prog.code_size))
	format := C.GoStringN(prog.format, C.int(prog.format_size))
	var opts []byte
	if args.compile_options != nil {
		opts = unsafe.Slice((*byte)(unsafe.Pointer(args.compile_options)), int(args.compile_options_size))
	}
	ps, os := sha256.Sum256(code), sha256.Sum256(opts)

	fields := append(append([]compilecache.KeyField(nil), b.keyBase...),
		compilecache.KeyField{Name: "program_format", Value: format},
		compilecache.KeyField{Name: "program_sha256", Value: hex.EncodeToString(ps[:])},
		compilecache.KeyField{Name: "compile_options_sha256", Value: hex.EncodeToString(os[:])})
	return compilecache.Key{Fields: fields}
}

// serialize returns PJRT_Executable_Serialize's bytes of loaded, copied into Go memory, and the
// executable's name.
func (hp *hookedPlugin) serialize(loaded unsafe.Pointer) ([]byte, string, error) {
	var exe unsafe.Pointer
	if cerr := C.gotpu_get_executable(hp.orig, loaded, &exe); cerr != nil {
		return nil, "", fmt.Errorf("PJRT_LoadedExecutable_GetExecutable: %s", hp.takeError(cerr))
	}
	defer C.gotpu_executable_destroy(hp.orig, exe)
	var name string
	var cname *C.char
	var nameSize C.size_t
	if cerr := C.gotpu_executable_name(hp.orig, exe, &cname, &nameSize); cerr == nil && cname != nil {
		name = C.GoStringN(cname, C.int(min(nameSize, 4096)))
	} else if cerr != nil {
		hp.takeError(cerr)
	}
	var bytes *C.char
	var size C.size_t
	var backing unsafe.Pointer
	var deleter unsafe.Pointer
	if cerr := C.gotpu_serialize(hp.orig, exe, &bytes, &size, &backing, &deleter); cerr != nil {
		return nil, name, fmt.Errorf("PJRT_Executable_Serialize: %s", hp.takeError(cerr))
	}
	defer C.gotpu_serialized_free(deleter, backing)
	if bytes == nil || size == 0 {
		return nil, name, errors.New("PJRT_Executable_Serialize returned no bytes")
	}
	out := make([]byte, int(size))
	copy(out, unsafe.Slice((*byte)(unsafe.Pointer(bytes)), int(size)))
	return out, name, nil
}

// takeError returns the message of a PJRT_Error* and destroys it.
func (hp *hookedPlugin) takeError(cerr unsafe.Pointer) string {
	buf := (*C.char)(C.malloc(1024))
	defer C.free(unsafe.Pointer(buf))
	C.gotpu_error_take(hp.orig, cerr, buf, 1024)
	return C.GoString(buf)
}

// stats returns a copy of b's counters.
func (b *compileBinding) snapshot() CompileStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}
