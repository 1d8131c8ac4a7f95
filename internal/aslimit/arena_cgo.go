//go:build cgo && linux

package aslimit

/*
#include <malloc.h>
#include <sys/resource.h>

// gotpu_arena_cap runs when the binary is loaded, before the Go runtime starts its threads.
static int gotpu_arenas_capped;

__attribute__((constructor)) static void gotpu_arena_cap(void) {
	struct rlimit r;
	if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
		gotpu_arenas_capped = mallopt(M_ARENA_MAX, 2);
	}
}

static int gotpu_arenas_capped_get(void) { return gotpu_arenas_capped; }
*/
import "C"

// ArenasCapped reports whether the process started under a finite RLIMIT_AS and glibc's malloc
// arenas were capped at two.
func ArenasCapped() bool { return C.gotpu_arenas_capped_get() != 0 }
