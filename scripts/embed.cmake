# cmake -DIN=FILE -DOUT=HEADER -DNAME=SYMBOL -P embed.cmake: write FILE's
# bytes as "static const char SYMBOL[]", NUL-terminated, and its length as
# SYMBOL_len (preset.c builds config/providers.ini in this way).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "/* Generated from ${IN} by scripts/embed.cmake. */\n"
	"static const char ${NAME}[] = {\n${bytes}0x00 };\n"
	"static const size_t ${NAME}_len = ${n};\n")
