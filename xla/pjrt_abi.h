// gotpu's own declarations of the few PJRT C API structures the compilation cache uses.
//
// go-xla v0.1.4 keeps its copy of pjrt_c_api.h private to its package and has no call for
// PJRT_Executable_Serialize or PJRT_Executable_DeserializeAndLoad, so gotpu reaches them through the
// plugin's PJRT_Api table itself. The PJRT C API's major version 0 only ever appends fields (to
// argument structs and to the table), so these prefixes hold for every 0.x plugin; struct_size
// tells a plugin which fields a caller knows. TestPJRTABIMatchesGoXLAHeader compiles these
// declarations next to go-xla's header and checks every offset and size used here.
#ifndef GOTPU_PJRT_ABI_H
#define GOTPU_PJRT_ABI_H

#include <stddef.h>

typedef struct {
  size_t struct_size;
  void* extension_start;
  int major_version;
  int minor_version;
} gotpu_PJRT_Api_Version;

// The table: a header, then function pointers in the C API's order.
typedef struct {
  size_t struct_size;
  void* extension_start;
  gotpu_PJRT_Api_Version pjrt_api_version;
  void* fn[];
} gotpu_PJRT_Api;

// Positions in gotpu_PJRT_Api.fn (the C API's declaration order).
enum {
  GOTPU_PJRT_Error_Destroy = 0,
  GOTPU_PJRT_Error_Message = 1,
  GOTPU_PJRT_Client_Compile = 20,
  GOTPU_PJRT_Executable_Destroy = 40,
  GOTPU_PJRT_Executable_Name = 41,
  GOTPU_PJRT_Executable_Serialize = 49,
  GOTPU_PJRT_LoadedExecutable_Destroy = 50,
  GOTPU_PJRT_LoadedExecutable_GetExecutable = 51,
  GOTPU_PJRT_Executable_DeserializeAndLoad = 56,
  GOTPU_PJRT_FN_NEEDED = 57  // table entries the cache needs (through DeserializeAndLoad)
};
// Where the function pointers start (cgo cannot see a flexible array member).
enum { GOTPU_PJRT_API_FN_OFFSET = offsetof(gotpu_PJRT_Api, fn) };

typedef struct {
  size_t struct_size;
  void* extension_start;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
} gotpu_PJRT_Program;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void* client;
  const gotpu_PJRT_Program* program;
  const char* compile_options;
  size_t compile_options_size;
  void* executable;  // out: PJRT_LoadedExecutable*
} gotpu_PJRT_Client_Compile_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void* error;
} gotpu_PJRT_Error_Destroy_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const void* error;
  const char* message;  // out
  size_t message_size;  // out
} gotpu_PJRT_Error_Message_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void* loaded_executable;
  void* executable;  // out: PJRT_Executable*, owned by the caller
} gotpu_PJRT_LoadedExecutable_GetExecutable_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void* executable;
} gotpu_PJRT_Executable_Destroy_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void* executable;
  const char* executable_name;  // out
  size_t executable_name_size;  // out
} gotpu_PJRT_Executable_Name_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void* executable;
} gotpu_PJRT_LoadedExecutable_Destroy_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const void* executable;
  const char* serialized_bytes;   // out
  size_t serialized_bytes_size;   // out
  void* serialized_executable;    // out: backs serialized_bytes
  void (*serialized_executable_deleter)(void* exec);  // out
} gotpu_PJRT_Executable_Serialize_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  void* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  void* loaded_executable;  // out: PJRT_LoadedExecutable*
  const char* overridden_serialized_compile_options;
  size_t overridden_serialized_compile_options_size;
} gotpu_PJRT_Executable_DeserializeAndLoad_Args;

// The compile hook (compilehook_pjrt.c): gotpu_hook_install copies api into a table of its own
// whose PJRT_Client_Compile is a trampoline for slot (one per hooked plugin); the trampoline calls
// the Go hook, which calls the plugin's own compile through gotpu_compile_orig.
enum { GOTPU_HOOK_SLOTS = 4 };
gotpu_PJRT_Api* gotpu_hook_install(const gotpu_PJRT_Api* api, int slot);
void* gotpu_compile_orig(int slot, gotpu_PJRT_Client_Compile_Args* args);

// Thin calls through a table; each returns the plugin's PJRT_Error* (NULL: success).
void* gotpu_get_executable(const gotpu_PJRT_Api* api, void* loaded, void** exe);
void* gotpu_executable_name(const gotpu_PJRT_Api* api, void* exe, const char** name, size_t* size);
// deleter receives the plugin's serialized_executable_deleter (as a plain pointer, for cgo).
void* gotpu_serialize(const gotpu_PJRT_Api* api, void* exe, const char** bytes, size_t* size, void** backing,
                      void** deleter);
void gotpu_serialized_free(void* deleter, void* backing);
void* gotpu_deserialize_and_load(const gotpu_PJRT_Api* api, void* client, const char* bytes, size_t size,
                                 void** loaded);
void gotpu_executable_destroy(const gotpu_PJRT_Api* api, void* exe);
void gotpu_loaded_executable_destroy(const gotpu_PJRT_Api* api, void* loaded);
// gotpu_error_message copies the message of err into buf (NUL-terminated, truncated to cap) and
// destroys err.
void gotpu_error_take(const gotpu_PJRT_Api* api, void* err, char* buf, size_t cap);

#endif
