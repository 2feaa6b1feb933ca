# cmake -DIN=FILE -DOUT=HEADER -DNAME=SYMBOL -P embed.cmake: write FILE's
# bytes as "static const char SYMBOL[]", NUL-terminated, and its length as
# SYMBOL_len (preset.c builds config/providers.ini in this way). With
# -DETAG=1 also SYMBOL_etag, a quoted HTTP entity tag from the bytes' SHA-256
# (webui.c serves controller/web/ in this way).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
set(etag "")
if(ETAG)
	file(SHA256 ${IN} sum)
	string(SUBSTRING "${sum}" 0 16 sum)
	set(etag "static const char ${NAME}_etag[] = \"\\\"${sum}\\\"\";\n")
endif()
file(WRITE ${OUT} "/* Generated from ${IN} by scripts/embed.cmake. */\n"
	"static const char ${NAME}[] = {\n${bytes}0x00 };\n"
	"static const size_t ${NAME}_len = ${n};\n${etag}")
