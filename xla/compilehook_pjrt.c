//go:build !noxla

// The PJRT compile hook behind gotpu's compilation cache: see compilehook_pjrt.go.
#include <stdlib.h>
#include <string.h>

#include "pjrt_abi.h"
#include "_cgo_export.h"

typedef void* (*gotpu_fn_args)(void* args);
typedef void (*gotpu_fn_void)(void* args);  // PJRT_Error_Message and PJRT_Error_Destroy return nothing

// orig holds, per slot, the plugin's own table (its PJRT_Client_Compile is what a miss calls).
static const gotpu_PJRT_Api* orig[GOTPU_HOOK_SLOTS];

static void* trampoline0(void* args) { return gotpuCompileHook(0, (gotpu_PJRT_Client_Compile_Args*)args); }
static void* trampoline1(void* args) { return gotpuCompileHook(1, (gotpu_PJRT_Client_Compile_Args*)args); }
static void* trampoline2(void* args) { return gotpuCompileHook(2, (gotpu_PJRT_Client_Compile_Args*)args); }
static void* trampoline3(void* args) { return gotpuCompileHook(3, (gotpu_PJRT_Client_Compile_Args*)args); }
static gotpu_fn_args trampolines[GOTPU_HOOK_SLOTS] = {trampoline0, trampoline1, trampoline2, trampoline3};

gotpu_PJRT_Api* gotpu_hook_install(const gotpu_PJRT_Api* api, int slot) {
  if (slot < 0 || slot >= GOTPU_HOOK_SLOTS || api == NULL) return NULL;
  // The copy lives as long as the process: go-xla's plugin keeps using it after a runtime closes.
  gotpu_PJRT_Api* copy = (gotpu_PJRT_Api*)malloc(api->struct_size);
  if (copy == NULL) return NULL;
  memcpy(copy, api, api->struct_size);
  orig[slot] = api;
  copy->fn[GOTPU_PJRT_Client_Compile] = (void*)trampolines[slot];
  return copy;
}

void* gotpu_compile_orig(int slot, gotpu_PJRT_Client_Compile_Args* args) {
  return ((gotpu_fn_args)orig[slot]->fn[GOTPU_PJRT_Client_Compile])(args);
}

static void* call(const gotpu_PJRT_Api* api, int fn, void* args) {
  return ((gotpu_fn_args)api->fn[fn])(args);
}

void* gotpu_get_executable(const gotpu_PJRT_Api* api, void* loaded, void** exe) {
  gotpu_PJRT_LoadedExecutable_GetExecutable_Args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.loaded_executable = loaded;
  void* err = call(api, GOTPU_PJRT_LoadedExecutable_GetExecutable, &a);
  *exe = a.executable;
  return err;
}

void* gotpu_executable_name(const gotpu_PJRT_Api* api, void* exe, const char** name, size_t* size) {
  gotpu_PJRT_Executable_Name_Args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.executable = exe;
  void* err = call(api, GOTPU_PJRT_Executable_Name, &a);
  *name = a.executable_name;
  *size = a.executable_name_size;
  return err;
}

void* gotpu_serialize(const gotpu_PJRT_Api* api, void* exe, const char** bytes, size_t* size, void** backing,
                      void** deleter) {
  gotpu_PJRT_Executable_Serialize_Args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.executable = exe;
  void* err = call(api, GOTPU_PJRT_Executable_Serialize, &a);
  *bytes = a.serialized_bytes;
  *size = a.serialized_bytes_size;
  *backing = a.serialized_executable;
  *deleter = (void*)a.serialized_executable_deleter;
  return err;
}

void gotpu_serialized_free(void* deleter, void* backing) {
  if (deleter != NULL && backing != NULL) ((void (*)(void*))deleter)(backing);
}

void* gotpu_deserialize_and_load(const gotpu_PJRT_Api* api, void* client, const char* bytes, size_t size,
                                 void** loaded) {
  gotpu_PJRT_Executable_DeserializeAndLoad_Args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.client = client;
  a.serialized_executable = bytes;
  a.serialized_executable_size = size;
  void* err = call(api, GOTPU_PJRT_Executable_DeserializeAndLoad, &a);
  *loaded = a.loaded_executable;
  return err;
}

void gotpu_executable_destroy(const gotpu_PJRT_Api* api, void* exe) {
  if (exe == NULL) return;
  gotpu_PJRT_Executable_Destroy_Args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.executable = exe;
  void* err = call(api, GOTPU_PJRT_Executable_Destroy, &a);
  if (err != NULL) gotpu_error_take(api, err, NULL, 0);
}

void gotpu_loaded_executable_destroy(const gotpu_PJRT_Api* api, void* loaded) {
  if (loaded == NULL) return;
  gotpu_PJRT_LoadedExecutable_Destroy_Args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.executable = loaded;
  void* err = call(api, GOTPU_PJRT_LoadedExecutable_Destroy, &a);
  if (err != NULL) gotpu_error_take(api, err, NULL, 0);
}

void gotpu_error_take(const gotpu_PJRT_Api* api, void* err, char* buf, size_t cap) {
  if (err == NULL) return;
  if (buf != NULL && cap > 0) {
    gotpu_PJRT_Error_Message_Args m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.error = err;
    ((gotpu_fn_void)api->fn[GOTPU_PJRT_Error_Message])(&m);
    size_t n = m.message_size < cap - 1 ? m.message_size : cap - 1;
    if (m.message != NULL) memcpy(buf, m.message, n); else n = 0;
    buf[n] = 0;
  }
  gotpu_PJRT_Error_Destroy_Args d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.error = err;
  ((gotpu_fn_void)api->fn[GOTPU_PJRT_Error_Destroy])(&d);
}
