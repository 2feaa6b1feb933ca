/*
 * Notifications (controller/notify.c, notifyqueue.c, agent/hmac.c):
 * SHA-256 against FIPS 180-4 examples, HMAC-SHA256 against RFC 4231,
 * base64 against RFC 4648; Feishu's and DingTalk's signatures with a fixed
 * timestamp and secret; the body of each format; the verdict on answers;
 * redaction; event lists; the [notify.NAME] config errors; the queue
 * in a real SQLite inventory (an event queued once, a send row per
 * subscribed target); and the producers of stalled, key_reinjected and
 * release_deadline, each queued once per its dedupe key.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gpufleet/hmac.h"

#include "advise.h"
#include "config.h"
#include "db.h"
#include "keys.h"
#include "ledger.h"
#include "notify.h"
#include "notifysend.h"
#include "provider.h"
#include "samples.h"

static void
hex(const unsigned char *d, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* hex text to bytes; returns the length. */
static size_t
unhex(const char *s, unsigned char *out)
{
	size_t n = 0;
	unsigned v;

	while (s[0] != '\0' && sscanf(s, "%2x", &v) == 1) {
		out[n++] = (unsigned char)v;
		s += 2;
	}
	return n;
}

START_TEST(sha256_fips)
{
	static const struct {
		const char *msg;
		int repeat;
		const char *want;
	} t[] = {
		{ "abc", 1,
		    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f2"
		    "0015ad" },
		{ "", 1,
		    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b78"
		    "52b855" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
		    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419"
		    "db06c1" },
		{ "a", 1000000,
		    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7"
		    "112cd0" },
		/* The padding's edges: 55, 56 and 64 bytes. */
		{ "x", 55,
		    "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac7"
		    "7e4072" },
		{ "x", 56,
		    "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c"
		    "16888e" },
		{ "x", 64,
		    "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506"
		    "b5393c" },
	};
	struct hmac_sha256_ctx c;
	unsigned char d[HMAC_SHA256_LEN];
	char got[65];
	size_t i;
	int k;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		hmac_sha256_init(&c);
		for (k = 0; k < t[i].repeat; k++)
			hmac_sha256_update(&c, t[i].msg, strlen(t[i].msg));
		hmac_sha256_final(&c, d);
		hex(d, sizeof d, got);
		ck_assert_msg(
		    strcmp(got, t[i].want) == 0, "case %zu: %s", i, got);
	}
}
END_TEST

START_TEST(hmac_rfc4231)
{
	/* RFC 4231 test cases 1-4, 6 and 7 (5 is a truncated MAC). */
	static const struct {
		const char *key, *data, *want; /* key and data in hex */
	} t[] = {
		{ "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b",
		    "4869205468657265",
		    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e"
		    "32cff7" },
		{ "4a656665",
		    "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
		    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964"
		    "ec3843" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		    "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
		    "dddddddddddddddddddddddddddddddddddddddddd",
		    "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ce"
		    "d565fe" },
		{ "0102030405060708090a0b0c0d0e0f10111213141516171819",
		    "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
		    "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
		    "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff467"
		    "29665b" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaa",
		    "54657374205573696e67204c6172676572205468616e20426c6f636b2d"
		    "53697a65204b6579202d2048617368204b6579204669727374",
		    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0e"
		    "e37f54" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaa",
		    "5468697320697320612074657374207573696e672061206c6172676572"
		    "207468616e20626c6f636b2d73697a65206b657920616e642061206c61"
		    "72676572207468616e20626c6f636b2d73697a6520646174612e205468"
		    "65"
		    "206b6579206e6565647320746f20626520686173686564206265666f72"
		    "65206265696e6720757365642062792074686520484d414320616c676f"
		    "726974686d2e",
		    "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c"
		    "3a35e2" },
	};
	unsigned char key[256], data[256], mac[HMAC_SHA256_LEN];
	char got[65];
	size_t i, kl, dl;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		kl = unhex(t[i].key, key);
		dl = unhex(t[i].data, data);
		hmac_sha256(key, kl, data, dl, mac);
		hex(mac, sizeof mac, got);
		ck_assert_msg(
		    strcmp(got, t[i].want) == 0, "case %zu: %s", i, got);
	}
}
END_TEST

START_TEST(base64_rfc4648)
{
	static const char *const t[][2] = { { "", "" }, { "f", "Zg==" },
		{ "fo", "Zm8=" }, { "foo", "Zm9v" }, { "foob", "Zm9vYg==" },
		{ "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" } };
	char out[16];
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		ck_assert_uint_eq(hmac_base64((const unsigned char *)t[i][0],
				      strlen(t[i][0]), out, sizeof out),
		    strlen(t[i][1]));
		ck_assert_str_eq(out, t[i][1]);
	}
	/* Too small: nothing written but 0. */
	ck_assert_uint_eq(
	    hmac_base64((const unsigned char *)"foo", 3, out, 4), 0);
}
END_TEST

START_TEST(signatures)
{
	char sig[64];

	/* Computed with Python's hmac module from the documented rules. */
	ck_assert_int_eq(
	    notify_sign_feishu("SECabc", 1700000000, sig, sizeof sig), 0);
	ck_assert_str_eq(sig, "XprR1de+0SSBnwWyU/4k6x2TL+Q2SJlM5NNEdAv7MWg=");
	ck_assert_int_eq(
	    notify_sign_dingtalk("SECabc", 1700000000123LL, sig, sizeof sig),
	    0);
	ck_assert_str_eq(sig, "IqXBU/aLfwMA3S/tDcfRmHx5vWHw9Y1aOgFLBr1Ti9w=");
}
END_TEST

static struct config_notify
target(int format)
{
	struct config_notify n;

	memset(&n, 0, sizeof n);
	n.name = (char *)"t";
	n.format = format;
	return n;
}

static struct notify_msg msg = { 7, (char *)"job_failed", (char *)"a100-1",
	1700000000,
	(char *)"gpufleet: a100-1 job 7 (train) failed (exit 1) "
		"at 03:14 CST. Next: gpufleet logs a100-1:7",
	(char *)"gpufleet logs a100-1:7" };

START_TEST(bodies)
{
	static const struct {
		int format;
		const char *secret, *url, *body;
	} t[] = {
		{ NOTIFY_FORMAT_SLACK, NULL, "https://h/x",
		    "{\"text\":\"gpufleet: a100-1 job 7 (train) failed (exit "
		    "1) "
		    "at 03:14 CST. Next: gpufleet logs a100-1:7\"}" },
		{ NOTIFY_FORMAT_DISCORD, NULL, "https://h/x",
		    "{\"content\":\"gpufleet: a100-1 job 7 (train) failed "
		    "(exit 1) at 03:14 CST. Next: gpufleet logs a100-1:7\"}" },
		{ NOTIFY_FORMAT_JSON, NULL, "https://h/x",
		    "{\"kind\":\"job_failed\",\"instance\":\"a100-1\",\"time\":"
		    "\"2023-11-14T22:13:20Z\",\"text\":\"gpufleet: a100-1 job "
		    "7 "
		    "(train) failed (exit 1) at 03:14 CST. Next: gpufleet logs "
		    "a100-1:7\",\"next\":\"gpufleet logs a100-1:7\"}" },
		{ NOTIFY_FORMAT_FEISHU, NULL, "https://h/x",
		    "{\"msg_type\":\"text\",\"content\":{\"text\":\"gpufleet: "
		    "a100-1 job 7 (train) failed (exit 1) at 03:14 CST. Next: "
		    "gpufleet logs a100-1:7\"}}" },
		{ NOTIFY_FORMAT_FEISHU, "SECabc", "https://h/x",
		    "{\"msg_type\":\"text\",\"content\":{\"text\":\"gpufleet: "
		    "a100-1 job 7 (train) failed (exit 1) at 03:14 CST. Next: "
		    "gpufleet logs a100-1:7\"},\"timestamp\":\"1700000000\","
		    "\"sign\":\"XprR1de+0SSBnwWyU/"
		    "4k6x2TL+Q2SJlM5NNEdAv7MWg=\"}" },
		{ NOTIFY_FORMAT_DINGTALK, "SECabc",
		    "https://h/robot/send?access_token=X",
		    "{\"msgtype\":\"text\",\"text\":{\"content\":\"gpufleet: "
		    "a100-1 job 7 (train) failed (exit 1) at 03:14 CST. Next: "
		    "gpufleet logs a100-1:7\"}}" },
		{ NOTIFY_FORMAT_NTFY, NULL, "https://ntfy.sh/t",
		    "gpufleet: a100-1 job 7 (train) failed (exit 1) at 03:14 "
		    "CST. Next: gpufleet logs a100-1:7" },
	};
	struct notify_request r;
	struct config_notify n;
	char *cause = NULL;
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		n = target(t[i].format);
		ck_assert_int_eq(notify_request_build(&n, t[i].url, t[i].secret,
				     &msg, 1700000000123LL, &r, &cause),
		    0);
		ck_assert_msg(
		    strcmp(r.body, t[i].body) == 0, "case %zu: %s", i, r.body);
		if (t[i].format == NOTIFY_FORMAT_DINGTALK)
			ck_assert_str_eq(r.url,
			    "https://h/robot/send?access_token=X&timestamp="
			    "1700000000123&sign=IqXBU%2FaLfwMA3S%"
			    "2FtDcfRmHx5vWHw"
			    "9Y1aOgFLBr1Ti9w%3D");
		else
			ck_assert_str_eq(r.url, t[i].url);
		if (t[i].format == NOTIFY_FORMAT_NTFY) {
			ck_assert_str_eq(
			    r.title, "gpufleet: a100-1 job_failed");
			ck_assert_str_eq(
			    r.content_type, "text/plain; charset=utf-8");
		} else {
			ck_assert_ptr_null(r.title);
			ck_assert_str_eq(r.content_type, "application/json");
		}
		notify_request_clear(&r);
	}
	/* DingTalk's URL without a query yet. */
	n = target(NOTIFY_FORMAT_DINGTALK);
	ck_assert_int_eq(notify_request_build(&n, "https://h/send", "SECabc",
			     &msg, 1700000000123LL, &r, &cause),
	    0);
	ck_assert_ptr_nonnull(strstr(r.url, "https://h/send?timestamp="));
	notify_request_clear(&r);
}
END_TEST

START_TEST(verdicts)
{
	static const struct {
		int format;
		long http;
		const char *body;
		enum notify_verdict v;
		const char *why;
	} t[] = {
		{ NOTIFY_FORMAT_SLACK, 200, "ok", NOTIFY_OK, NULL },
		{ NOTIFY_FORMAT_DISCORD, 204, NULL, NOTIFY_OK, NULL },
		{ NOTIFY_FORMAT_JSON, 500, "", NOTIFY_RETRY, "HTTP 500" },
		{ NOTIFY_FORMAT_JSON, 503, "", NOTIFY_RETRY, "HTTP 503" },
		{ NOTIFY_FORMAT_JSON, 429, "", NOTIFY_RETRY, "HTTP 429" },
		{ NOTIFY_FORMAT_JSON, 404, "", NOTIFY_FAIL, "HTTP 404" },
		{ NOTIFY_FORMAT_JSON, 400, "", NOTIFY_FAIL, "HTTP 400" },
		{ NOTIFY_FORMAT_JSON, 301, "", NOTIFY_FAIL, "HTTP 301" },
		{ NOTIFY_FORMAT_JSON, 0, NULL, NOTIFY_RETRY, "no answer" },
		{ NOTIFY_FORMAT_FEISHU, 200, "{\"code\":0,\"msg\":\"success\"}",
		    NOTIFY_OK, NULL },
		{ NOTIFY_FORMAT_FEISHU, 200,
		    "{\"StatusCode\":0,\"StatusMessage\":\"success\"}",
		    NOTIFY_OK, NULL },
		{ NOTIFY_FORMAT_FEISHU, 200,
		    "{\"code\":19021,\"msg\":\"sign match fail\"}", NOTIFY_FAIL,
		    "code 19021: sign match fail" },
		{ NOTIFY_FORMAT_FEISHU, 200, "not json", NOTIFY_FAIL,
		    "HTTP 200 but the body is not JSON" },
		{ NOTIFY_FORMAT_DINGTALK, 200,
		    "{\"errcode\":0,\"errmsg\":\"ok\"}", NOTIFY_OK, NULL },
		{ NOTIFY_FORMAT_DINGTALK, 200,
		    "{\"errcode\":310000,\"errmsg\":\"sign not match\"}",
		    NOTIFY_FAIL, "errcode 310000: sign not match" },
		{ NOTIFY_FORMAT_DINGTALK, 200,
		    "{\"errcode\":130101,\"errmsg\":\"send too fast\"}",
		    NOTIFY_RETRY, "errcode 130101: send too fast" },
		{ NOTIFY_FORMAT_DINGTALK, 200, "{}", NOTIFY_FAIL,
		    "HTTP 200 without a errcode" },
	};
	char *why;
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		ck_assert_int_eq(
		    notify_judge(t[i].format, t[i].http, t[i].body, &why),
		    t[i].v);
		if (t[i].why == NULL)
			ck_assert_ptr_null(why);
		else
			ck_assert_str_eq(why, t[i].why);
		free(why);
	}
}
END_TEST

START_TEST(redact)
{
	static const char *const t[][2] = {
		{ "https://open.feishu.cn/open-apis/bot/v2/hook/abc",
		    "https://open.feishu.cn/..." },
		{ "https://oapi.dingtalk.com/robot/send?access_token=X",
		    "https://oapi.dingtalk.com/..." },
		{ "http://127.0.0.1:8080", "http://127.0.0.1:8080" },
		{ "https://user:pw@h.example/x", "https://h.example/..." },
	};
	char *s, *cause = NULL;
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		s = notify_redact(t[i][0]);
		ck_assert_str_eq(s, t[i][1]);
		free(s);
	}
	ck_assert_int_eq(notify_url_check("https://h/x", &cause), 0);
	ck_assert_int_eq(notify_url_check("ftp://h/x", &cause), -1);
	ck_assert_str_eq(cause, "only http:// and https:// URLs are sent to");
	free(cause);
	ck_assert_int_eq(notify_url_check("https:///x", &cause), -1);
	free(cause);
	ck_assert_int_eq(notify_url_check("https://h/a b", &cause), -1);
	free(cause);
}
END_TEST

START_TEST(events)
{
	unsigned m = 0;
	char *cause = NULL, *s;

	ck_assert_int_eq(
	    notify_events_parse("job_failed, stopped", &m, &cause), 0);
	ck_assert_uint_eq(
	    m, (1u << NOTIFY_JOB_FAILED) | (1u << NOTIFY_STOPPED));
	s = notify_events_string(m);
	ck_assert_str_eq(s, "job_failed stopped");
	free(s);
	ck_assert_int_eq(notify_events_parse("all", &m, &cause), 0);
	ck_assert_uint_eq(m, NOTIFY_EVENTS_ALL);
	s = notify_events_string(m);
	ck_assert_str_eq(s, "all");
	free(s);
	ck_assert_int_eq(
	    notify_events_parse("job_failed jobs_done", &m, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "unknown event 'jobs_done'"));
	free(cause);
	ck_assert_int_eq(notify_events_parse(" , ", &m, &cause), -1);
	free(cause);
}
END_TEST

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/gpufleet-notify.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	char cmd[96];

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Load text as a config; returns config_load's result, *cause. */
static int
load(const char *text, struct config *c, char **cause)
{
	char path[96];
	FILE *f;

	snprintf(path, sizeof path, "%s/config.ini", dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
	config_defaults(c);
	return config_load(c, path, 1, cause);
}

START_TEST(config_keys)
{
	static const struct {
		const char *text, *error; /* after "PATH:" */
	} bad[] = {
		{ "[notify.x]\nurl = https://h/\nevents = stopped nope\n",
		    "3: events: unknown event 'nope'" },
		{ "[notify.x]\nurl = https://h/\nformat = teams\n",
		    "3: format 'teams' must be json, slack, discord, feishu, "
		    "dingtalk or ntfy" },
		{ "[notify.x]\nurl = gopher://h/\n",
		    "2: url: only http:// and https:// URLs are sent to" },
		{ "[notify.x]\nformat = ntfy\n",
		    "2: [notify.x] needs one of url and url_file" },
		{ "[notify.x]\nurl = https://h/\nurl_file = /f\n",
		    "2: [notify.x] needs one of url and url_file" },
		{ "[notify.x]\nurl = https://h/\nsecret_file = /s\n",
		    "2: [notify.x]: secret_file is for the feishu and dingtalk "
		    "formats only" },
		{ "[notify.x]\nurl = https://h/\ntimeout = 0s\n",
		    "3: timeout '0s' must be a duration from 1s to 10m" },
		{ "[notify.x]\nurl = https://h/\nretries = -1\n",
		    "3: retries = '-1' is not a number from 0 to 100" },
		{ "[notify.x y]\nurl = https://h/\n",
		    "2: bad target name in [notify.x y] (letters, digits, . _ "
		    "-)" },
		{ "[notify]\nhost_down_after = 0\n",
		    "2: host_down_after '0' must be a duration from 1s to 30d "
		    "(10m, 1h30m)" },
		{ "[notify]\nrelease_warn = 31d\n",
		    "2: release_warn '31d' must be a duration from 1s to 30d "
		    "(2d, 12h)" },
	};
	struct config c;
	const struct config_notify *n;
	char *cause = NULL;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(load(bad[i].text, &c, &cause), -1);
		ck_assert_msg(strstr(cause, bad[i].error) != NULL,
		    "case %zu: %s", i, cause);
		free(cause);
		cause = NULL;
		config_clear(&c);
	}
	ck_assert_int_eq(load("[notify]\nhost_down_after = 15m\n"
			      "[notify.ding]\nurl = https://h/s?a=1\n"
			      "format = dingtalk\nsecret_file = /s\n"
			      "[notify.fs]\nurl_file = /u\nformat = feishu\n"
			      "events = job_failed,job_finished\n"
			      "min_interval = 1m\ntimeout = 30s\nretries = 2\n"
			      "ca_file = /ca.pem\nfrom_instances = yes\n",
			     &c, &cause),
	    0);
	ck_assert_int_eq(c.notify_host_down_after, 900);
	ck_assert_int_eq(c.notify_release_warn, 2 * 86400);
	ck_assert_uint_eq(c.nnotifies, 2);
	ck_assert_ptr_nonnull(n = config_notify(&c, "ding"));
	ck_assert_int_eq(n->min_interval, NOTIFY_DINGTALK_INTERVAL);
	ck_assert_uint_eq(n->events, NOTIFY_EVENTS_ALL);
	ck_assert_int_eq(n->timeout, 10);
	ck_assert_int_eq(n->retries, 5);
	ck_assert_int_eq(n->from_instances, 0);
	ck_assert_ptr_nonnull(n = config_notify(&c, "fs"));
	ck_assert_int_eq(n->format, NOTIFY_FORMAT_FEISHU);
	ck_assert_str_eq(n->url_file, "/u");
	ck_assert_uint_eq(
	    n->events, (1u << NOTIFY_JOB_FAILED) | (1u << NOTIFY_JOB_FINISHED));
	ck_assert_int_eq(n->min_interval, 60);
	ck_assert_int_eq(n->timeout, 30);
	ck_assert_int_eq(n->retries, 2);
	ck_assert_str_eq(n->ca_file, "/ca.pem");
	ck_assert_int_eq(n->from_instances, 1);
	config_clear(&c);
}
END_TEST

static int
query_int(struct inventory *inv, const char *sql)
{
	sqlite3_stmt *st;
	int v = -1;

	ck_assert_int_eq(sqlite3_prepare_v2(inv->db, sql, -1, &st, NULL), 0);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

START_TEST(queue_once)
{
	struct inventory *inv;
	struct config c;
	char path[96], *cause = NULL;

	ck_assert_int_eq(load("[notify.a]\nurl = https://h/a\n"
			      "[notify.b]\nurl = https://h/b\n"
			      "events = job_failed\n"
			      "[notify.c]\nurl = https://h/c\n"
			      "events = stopped\n",
			     &c, &cause),
	    0);
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	inv->config = &c;
	ck_assert_int_eq(notifyqueue_add(inv, NOTIFY_JOB_FAILED, "a100-1",
			     1700000000, "job 7 (train) failed (exit 1)",
			     "gpufleet logs a100-1:7", "journal:1:e:5", &cause),
	    0);
	/* The same entry seen again: nothing more. */
	ck_assert_int_eq(notifyqueue_add(inv, NOTIFY_JOB_FAILED, "a100-1",
			     1700000000, "job 7 (train) failed (exit 1)",
			     "gpufleet logs a100-1:7", "journal:1:e:5", &cause),
	    0);
	/* Nobody takes schedule_failed but a: one send row. */
	ck_assert_int_eq(
	    notifyqueue_add(inv, NOTIFY_SCHEDULE_FAILED, NULL, 1700000000,
		"schedule s: failed", NULL, "action:3", &cause),
	    0);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_msg"), 2);
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_send WHERE msg_id = "
			     "1 AND target IN ('a', 'b') AND state = "
			     "'pending'"),
	    2);
	ck_assert_int_eq(
	    query_int(inv, "SELECT count(*) FROM notify_send WHERE msg_id = 2"),
	    1);
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_msg WHERE text LIKE "
			     "'gpufleet: a100-1 job 7 (train) failed (exit 1) "
			     "at %. Next: gpufleet logs a100-1:7'"),
	    1);
	/* A row claimed by a process that is gone: unknown, not pending. */
	ck_assert_int_eq(sqlite3_exec(inv->db,
			     "UPDATE notify_send SET state = 'sending', "
			     "sender_pid = 999999999, sender_start = 1 WHERE "
			     "target = 'a' AND msg_id = 1",
			     NULL, NULL, NULL),
	    0);
	ck_assert_int_eq(notifysend_recover(inv, &cause), 0);
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_send WHERE target = "
			     "'a' AND msg_id = 1 AND state = 'unknown' AND "
			     "last_error LIKE '%may not have arrived'"),
	    1);
	inventory_close(inv);
	config_clear(&c);
}
END_TEST

/* A config with targets a (every event) and s (stalled only), an inventory. */
static struct inventory *
producers_open(struct config *c, struct instance *in)
{
	struct inventory *inv;
	char path[96], *cause = NULL;

	ck_assert_int_eq(load("[notify]\nrelease_warn = 1d\n"
			      "[notify.a]\nurl = https://h/a\n"
			      "[notify.s]\nurl = https://h/s\n"
			      "events = stalled\n",
			     c, &cause),
	    0);
	ck_assert_int_eq(c->notify_release_warn, 86400);
	snprintf(path, sizeof path, "%s/fleet.db", dir);
	ck_assert_int_eq(inventory_open(path, &inv, &cause), 0);
	inv->config = c;
	instance_init(in);
	in->name = strdup("a100-1");
	in->host = strdup("127.0.0.1");
	free(in->provider);
	in->provider = strdup("autodl");
	in->created_at = 1;
	ck_assert_int_eq(inventory_begin(inv, &cause), 0);
	ck_assert_int_eq(inventory_add(inv, in, &cause), 0);
	ck_assert_int_eq(inventory_commit(inv, &cause), 0);
	return inv;
}

/* Stale progress while the instance answers: once per file mtime. */
START_TEST(produce_stalled)
{
	struct inventory *inv;
	struct instance in;
	struct report rep;
	struct config c;
	char *cause = NULL;

	inv = producers_open(&c, &in);
	memset(&rep, 0, sizeof rep);
	rep.time = 1700000000;
	/* No progress file: nothing says it should progress. */
	ck_assert_int_eq(
	    samples_notify_stalled(inv, &in, 1700000000, &rep, 1800, &cause),
	    0);
	rep.has_progress = 1;
	rep.progress_text = (char *)"epoch 3 \033[31mloss 0.4\nsecond line";
	rep.progress_mtime = rep.time - 1800; /* just not stale */
	ck_assert_int_eq(
	    samples_notify_stalled(inv, &in, 1700000000, &rep, 1800, &cause),
	    0);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_msg"), 0);
	rep.progress_mtime = rep.time - 7200;
	ck_assert_int_eq(
	    samples_notify_stalled(inv, &in, 1700000000, &rep, 1800, &cause),
	    0);
	/* Seen again an hour later, the same file: the same streak. */
	rep.time += 3600;
	ck_assert_int_eq(
	    samples_notify_stalled(inv, &in, 1700003600, &rep, 1800, &cause),
	    0);
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_msg WHERE kind = "
			     "'stalled' AND instance = 'a100-1' AND dedupe = "
			     "'stalled:1:1699992800' AND next = 'gpufleet "
			     "status a100-1'"),
	    1);
	/* The escape sequence from the instance is made visible. */
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_msg WHERE text LIKE "
			     "'gpufleet: a100-1 is stalled: its progress file "
			     "is unchanged for 2h00m (\"epoch 3 \\e[31mloss "
			     "0.4\") at %' AND instr(text, char(27)) = 0 AND "
			     "instr(text, 'second') = 0"),
	    1);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_send"), 2);
	/* The file moved, then went stale again: a new streak. */
	rep.progress_mtime = rep.time - 3600;
	ck_assert_int_eq(
	    samples_notify_stalled(inv, &in, 1700003600, &rep, 1800, &cause),
	    0);
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_msg WHERE kind = "
			     "'stalled'"),
	    2);
	instance_clear(&in);
	inventory_close(inv);
	config_clear(&c);
}
END_TEST

#define ED25519                                                                \
	"AAAAC3NzaC1lZDI1NTE5AAAAIDEvK1fpksulwHA6JHVHY3aoM90PEdEB4zeL2VO0T9P6"

/* A retired key back in authorized_keys: once per key and retirement. */
START_TEST(produce_key_reinjected)
{
	struct inventory *inv;
	struct instance in;
	struct config c;
	char *cause = NULL, *found = NULL;
	const char *text = "ssh-ed25519 " ED25519 " back\n";

	inv = producers_open(&c, &in);
	ck_assert_int_eq(keys_retire_blob(inv, in.id, "ssh-ed25519", ED25519,
			     "rotated", &cause),
	    0);
	ck_assert_int_eq(
	    keys_reinjected(inv, in.id, "# none\n", &found, &cause), 0);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_msg"), 0);
	ck_assert_int_eq(keys_reinjected(inv, in.id, text, &found, &cause), 1);
	free(found);
	/* status, exec and keys check all see it: one message. */
	ck_assert_int_eq(keys_reinjected(inv, in.id, text, &found, &cause), 1);
	free(found);
	ck_assert_int_eq(
	    query_int(inv,
		"SELECT count(*) FROM notify_msg WHERE kind = "
		"'key_reinjected' AND instance = 'a100-1' AND "
		"text LIKE 'gpufleet: a100-1 has a key gpufleet "
		"took off back in its authorized_keys (re-added "
		"by the platform?): ssh-ed25519 SHA256:% "
		"(rotated) at %' AND next = 'gpufleet keys rotate "
		"a100-1 --revoke OLD.pub (a file holding that "
		"key)' AND dedupe LIKE 'key_reinjected:1:SHA256:%'"),
	    1);
	/* Only target a takes it. */
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_send WHERE target = "
			     "'a'"),
	    1);
	/* Removed again and retired anew, then back: news again. */
	ck_assert_int_eq(sqlite3_exec(inv->db,
			     "UPDATE retired_key SET retired_at = retired_at + "
			     "60",
			     NULL, NULL, NULL),
	    0);
	ck_assert_int_eq(keys_reinjected(inv, in.id, text, &found, &cause), 1);
	free(found);
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_msg WHERE kind = "
			     "'key_reinjected'"),
	    2);
	instance_clear(&in);
	inventory_close(inv);
	config_clear(&c);
}
END_TEST

#define DAY 86400

/*
 * A stopped instance near its platform's release: within release_warn
 * (1d here) of stopped + release_after_days, once per stopped period; past
 * the deadline it may be gone.
 */
START_TEST(produce_release_deadline)
{
	static const struct ledger_event ev[] = { { 10, "running", "stated" },
		{ 20, "stopped", "performed" }, { 30, "stopped", "stated" } };
	struct provider_change chg;
	struct inventory *inv;
	struct instance in;
	struct config c;
	char *cause = NULL;
	int64_t s = 1700000000;

	ck_assert_int_eq(advise_stopped_since(ev, 3), 20);
	ck_assert_int_eq(advise_stopped_since(ev, 1), 0);
	ck_assert_int_eq(advise_stopped_since(ev, 0), 0);
	inv = producers_open(&c, &in);
	ck_assert_int_eq(
	    ledger_add(inv, in.id, s - DAY, "running", "stated", NULL, &cause),
	    0);
	ck_assert_int_eq(
	    ledger_add(inv, in.id, s, "stopped", "performed", NULL, &cause), 0);
	/* No release rule for autodl yet. */
	ck_assert_int_eq(
	    advise_notify_release(inv, &c, s + 30 * DAY, &cause), 0);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_msg"), 0);
	memset(&chg, 0, sizeof chg);
	chg.set_release = 1;
	chg.release_after_days = 4;
	ck_assert_int_eq(provider_write(inv, "autodl", 1, &chg, &cause), 0);
	/* Two days from the release, more than release_warn: nothing yet. */
	ck_assert_int_eq(
	    advise_notify_release(inv, &c, s + 2 * DAY, &cause), 0);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_msg"), 0);
	ck_assert_int_eq(
	    advise_notify_release(inv, &c, s + 3 * DAY + 3600, &cause), 0);
	/* The same stop stated again is the same period. */
	ck_assert_int_eq(ledger_add(inv, in.id, s + 3 * DAY + 7200, "stopped",
			     "stated", NULL, &cause),
	    0);
	ck_assert_int_eq(
	    advise_notify_release(inv, &c, s + 3 * DAY + 7200, &cause), 0);
	ck_assert_int_eq(
	    query_int(inv,
		"SELECT count(*) FROM notify_msg WHERE kind = "
		"'release_deadline' AND instance = 'a100-1' AND "
		"dedupe = 'release_deadline:1:1700000000' AND "
		"text LIKE 'gpufleet: a100-1 will be released by "
		"autodl with its data on 20__-__-__ __:__ % "
		"(stopped 3d01h; autodl releases instances "
		"stopped 4 days) at %' AND next LIKE 'start it, "
		"or copy your data off before 20__-__-__ __:__ %'"),
	    1);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_msg"), 1);
	/* Started and stopped again: a new period, found past its release. */
	ck_assert_int_eq(ledger_add(inv, in.id, s + 5 * DAY, "running",
			     "observed", NULL, &cause),
	    0);
	ck_assert_int_eq(
	    advise_notify_release(inv, &c, s + 5 * DAY, &cause), 0);
	ck_assert_int_eq(ledger_add(inv, in.id, s + 6 * DAY, "stopped",
			     "performed", NULL, &cause),
	    0);
	ck_assert_int_eq(
	    advise_notify_release(inv, &c, s + 11 * DAY, &cause), 0);
	ck_assert_int_eq(query_int(inv,
			     "SELECT count(*) FROM notify_msg WHERE kind = "
			     "'release_deadline' AND dedupe = "
			     "'release_deadline:1:1700518400' AND text LIKE "
			     "'%was due for release by autodl on % it and its "
			     "data may be gone at %' AND next = 'look on the "
			     "console; gpufleet mark a100-1 released if it is "
			     "gone'"),
	    1);
	ck_assert_int_eq(query_int(inv, "SELECT count(*) FROM notify_msg"), 2);
	instance_clear(&in);
	inventory_close(inv);
	config_clear(&c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("core");
	TCase *db = tcase_create("db");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, sha256_fips);
	tcase_add_test(tc, hmac_rfc4231);
	tcase_add_test(tc, base64_rfc4648);
	tcase_add_test(tc, signatures);
	tcase_add_test(tc, bodies);
	tcase_add_test(tc, verdicts);
	tcase_add_test(tc, redact);
	tcase_add_test(tc, events);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(db, setup, teardown);
	tcase_add_test(db, config_keys);
	tcase_add_test(db, queue_once);
	tcase_add_test(db, produce_stalled);
	tcase_add_test(db, produce_key_reinjected);
	tcase_add_test(db, produce_release_deadline);
	suite_add_tcase(s, db);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
