#!/bin/sh
# CMake compiler and linker launcher for the static agent: runs the command
# CMake built for the C compiler with musl-gcc (the first argument) instead.
#   musl-cc.sh MUSL_GCC CC ARGS...  ->  MUSL_GCC ARGS...
musl=$1
shift 2
exec "$musl" "$@"
