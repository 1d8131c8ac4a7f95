package gobackend

//go:generate go run ./internal/genops -out gen_ops.go
