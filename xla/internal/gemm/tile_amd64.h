// The 12×32 register tile of the AVX-512 kernels (kernel_amd64.s, kernel_bf16_amd64.s,
// kernel_strided_amd64.s): row r of C in Z(2r) (columns 0-15) and Z(2r+1) (16-31), written at
// DI with rows DX bytes apart.

// TILE_ZERO clears the tile's 24 accumulators.
#define TILE_ZERO \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// TILE_ROW_ADD adds C's row at DI into lo and hi, stores them there and moves DI to the next row.
#define TILE_ROW_ADD(lo, hi) \
	VADDPS (DI), lo, lo; \
	VADDPS 64(DI), hi, hi; \
	VMOVUPS lo, (DI); \
	VMOVUPS hi, 64(DI); \
	ADDQ DX, DI

// TILE_ROW_STORE stores lo and hi as C's row at DI and moves DI to the next row.
#define TILE_ROW_STORE(lo, hi) \
	VMOVUPS lo, (DI); \
	VMOVUPS hi, 64(DI); \
	ADDQ DX, DI

// TILE_ADD adds the tile into C (beta != 0).
#define TILE_ADD \
	TILE_ROW_ADD(Z0, Z1); TILE_ROW_ADD(Z2, Z3); TILE_ROW_ADD(Z4, Z5); \
	TILE_ROW_ADD(Z6, Z7); TILE_ROW_ADD(Z8, Z9); TILE_ROW_ADD(Z10, Z11); \
	TILE_ROW_ADD(Z12, Z13); TILE_ROW_ADD(Z14, Z15); TILE_ROW_ADD(Z16, Z17); \
	TILE_ROW_ADD(Z18, Z19); TILE_ROW_ADD(Z20, Z21); TILE_ROW_ADD(Z22, Z23)

// TILE_STORE writes the tile over C (beta == 0).
#define TILE_STORE \
	TILE_ROW_STORE(Z0, Z1); TILE_ROW_STORE(Z2, Z3); TILE_ROW_STORE(Z4, Z5); \
	TILE_ROW_STORE(Z6, Z7); TILE_ROW_STORE(Z8, Z9); TILE_ROW_STORE(Z10, Z11); \
	TILE_ROW_STORE(Z12, Z13); TILE_ROW_STORE(Z14, Z15); TILE_ROW_STORE(Z16, Z17); \
	TILE_ROW_STORE(Z18, Z19); TILE_ROW_STORE(Z20, Z21); TILE_ROW_STORE(Z22, Z23)
