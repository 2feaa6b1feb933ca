/*
 * The instance's own notifications (agent/notify.c): the same bytes as
 * the controller's for the same message in every format (body, URL with
 * DingTalk's signature, Feishu's signed body, content type, ntfy's title),
 * the same text, the verdicts, and D/notify.json: its validation, its
 * mode, its removal, and the controller's document read back.
 */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "notify.h"

/*
 * Texts as both sides make them: never with control characters (the
 * controller's are escaped by vis.c, the agent's replaced by notif_clean).
 */
static const char *const texts[] = {
	"gpufleet: a100-1 job 7 (train) finished at 03:14 UTC. Next: "
	"gpufleet logs a100-1:7",
	"quotes \" and \\ backslash, a tab\there, a newline\nthere",
	"UTF-8: caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x9a\x80 / "
	"slash",
	"",
};

/* Both sides' request for one message and target, compared. */
static void
same_request(int format, const char *url, const char *secret,
    const char *instance, const char *next, const char *text)
{
	struct config_notify n;
	struct notify_request cr;
	struct notif_target t;
	struct notif_req ar;
	struct notify_msg m;
	char *cause = NULL;
	int64_t now_ms = 1764640000123LL;

	memset(&n, 0, sizeof n);
	n.name = "t";
	n.format = format;
	memset(&m, 0, sizeof m);
	m.kind = "job_finished";
	m.instance = (char *)instance;
	m.t = 1764640000;
	m.text = (char *)text;
	m.next = (char *)next;
	ck_assert_int_eq(
	    notify_request_build(&n, url, secret, &m, now_ms, &cr, &cause), 0);
	memset(&t, 0, sizeof t);
	snprintf(t.name, sizeof t.name, "t");
	t.format = format;
	t.url = (char *)url;
	t.secret = (char *)secret;
	notif_request(&t, m.kind, instance, m.t, text, next, now_ms, &ar);
	ck_assert_msg(ar.body.len == strlen(cr.body) &&
		memcmp(ar.body.data, cr.body, ar.body.len) == 0,
	    "format %d body:\n agent %s\n ctrl  %s", format, ar.body.data,
	    cr.body);
	ck_assert_str_eq(ar.url, cr.url);
	ck_assert_str_eq(ar.content_type, cr.content_type);
	if (cr.title == NULL)
		ck_assert_ptr_null(ar.title);
	else
		ck_assert_str_eq(ar.title, cr.title);
	notify_request_clear(&cr);
	notif_req_free(&ar);
}

START_TEST(bodies_equal)
{
	static const char *const secrets[] = { NULL, "SECa1b2c3" };
	size_t i;
	int f, s;

	for (f = NOTIFY_FORMAT_JSON; f <= NOTIFY_FORMAT_NTFY; f++)
		for (s = 0; s < 2; s++)
			for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
				same_request(f,
				    "https://hooks.example.com/x/y?token=abc",
				    secrets[s], "a100-1",
				    "gpufleet logs a100-1:7", texts[i]);
				same_request(f, "http://127.0.0.1:9/hook",
				    secrets[s], NULL, NULL, texts[i]);
			}
}
END_TEST

START_TEST(text_equal)
{
	static const long long ago[] = { 0, 3600, 86399, 86400, 200000, -7200 };
	char *a, *c, big[4000];
	long long now = 1764640000;
	size_t i;

	setenv("TZ", "Asia/Shanghai", 1);
	tzset();
	for (i = 0; i < sizeof ago / sizeof ago[0]; i++) {
		a = notif_text("a100-1", "job 7 finished", now - ago[i], now,
		    "gpufleet logs a100-1:7");
		c = notify_text("a100-1", "job 7 finished", now - ago[i], now,
		    "gpufleet logs a100-1:7");
		ck_assert_str_eq(a, c);
		free(a);
		free(c);
	}
	/* Cut at the same character's start. */
	for (i = 0; i + 3 < sizeof big; i += 3)
		memcpy(big + i, "\xe4\xb8\xad", 3);
	big[i] = '\0';
	a = notif_text(NULL, big, now, now, NULL);
	c = notify_text(NULL, big, now, now, NULL);
	ck_assert_str_eq(a, c);
	ck_assert_uint_le(strlen(a), NOTIF_TEXT_MAX);
	free(a);
	free(c);
	unsetenv("TZ");
	tzset();
}
END_TEST

START_TEST(verdicts)
{
	char *why;

	ck_assert_int_eq(notif_judge(NOTIF_FORMAT_JSON, 200, "ok", 2, &why), 1);
	ck_assert_ptr_null(why);
	ck_assert_int_eq(notif_judge(NOTIF_FORMAT_JSON, 500, "", 0, &why), 0);
	ck_assert_str_eq(why, "HTTP 500");
	free(why);
	ck_assert_int_eq(notif_judge(NOTIF_FORMAT_FEISHU, 200,
			     "{\"code\":0,\"msg\":\"success\"}", 26, &why),
	    1);
	ck_assert_int_eq(
	    notif_judge(NOTIF_FORMAT_FEISHU, 200,
		"{\"code\":19021,\"msg\":\"sign match fail\"}", 38, &why),
	    0);
	ck_assert_str_eq(why, "code 19021");
	free(why);
	ck_assert_int_eq(notif_judge(NOTIF_FORMAT_DINGTALK, 200,
			     "{\"errcode\":0}", 13, &why),
	    1);
	ck_assert_int_eq(
	    notif_judge(NOTIF_FORMAT_DINGTALK, 200, "ok", 2, &why), 0);
	ck_assert_str_eq(why, "HTTP 200 but the body is not JSON");
	free(why);
}
END_TEST

#define T1                                                                     \
	"{\"name\":\"phone\",\"format\":\"feishu\",\"url\":"                   \
	"\"https://open.feishu.cn/open-apis/bot/v2/hook/x\",\"secret\":"       \
	"\"s3\",\"events\":[\"job_finished\",\"stopped\"],\"instance\":"       \
	"\"a100-1\"}"

struct ncase {
	const char *text;
	const char *cause; /* NULL: valid */
};

static const struct ncase ncases[] = {
	{ "{\"version\":1,\"targets\":[" T1 "]}", NULL },
	{ "{\"version\":1,\"targets\":[]}", NULL },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"json\","
	  "\"url\":\"http://127.0.0.1/\",\"secret\":null,\"events\":"
	  "[\"job_failed\"],\"instance\":\"i\"}]}",
	    NULL },
	{ "{\"version\":2,\"targets\":[]}", "version" },
	{ "{\"version\":1}", "targets" },
	{ "{\"version\":1,\"targets\":[],\"x\":1}", "x: unknown key" },
	{ "[]", "not an object" },
	{ "{\"version\":1,\"targets\":[" T1 "," T1 "]}", "named twice" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"xml\","
	  "\"url\":\"http://h/\",\"events\":[\"stopped\"],\"instance\":"
	  "\"i\"}]}",
	    "format" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"json\","
	  "\"url\":\"ftp://h/\",\"events\":[\"stopped\"],\"instance\":"
	  "\"i\"}]}",
	    "url" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"json\","
	  "\"url\":\"http://h/a b\",\"events\":[\"stopped\"],\"instance\":"
	  "\"i\"}]}",
	    "url" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"json\","
	  "\"url\":\"http://h/\",\"events\":[\"nope\"],\"instance\":"
	  "\"i\"}]}",
	    "events[0]" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"json\","
	  "\"url\":\"http://h/\",\"events\":[],\"instance\":\"i\"}]}",
	    "events" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"json\","
	  "\"url\":\"http://h/\",\"secret\":3,\"events\":[\"stopped\"],"
	  "\"instance\":\"i\"}]}",
	    "secret" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a\",\"format\":\"json\","
	  "\"url\":\"http://h/\",\"events\":[\"stopped\"]}]}",
	    "instance" },
	{ "{\"version\":1,\"targets\":[{\"name\":\"a b\",\"format\":\"json\","
	  "\"url\":\"http://h/\",\"events\":[\"stopped\"],\"instance\":"
	  "\"i\"}]}",
	    "name" },
};

START_TEST(notify_json_valid)
{
	const struct ncase *c = &ncases[_i];
	struct notif_conf nc;
	char *cause = NULL;
	int r;

	r = notif_parse(c->text, strlen(c->text), &nc, &cause);
	if (c->cause == NULL) {
		ck_assert_msg(r == 0, "%s: %s", c->text, cause);
		notif_free(&nc);
	} else {
		ck_assert_msg(r != 0, "accepted: %s", c->text);
		ck_assert_msg(strstr(cause, c->cause) != NULL,
		    "%s: cause '%s' lacks '%s'", c->text, cause, c->cause);
		free(cause);
	}
}
END_TEST

START_TEST(notify_set_file)
{
	char top[] = "/tmp/gpufleet-notify-XXXXXX", dir[64], *path;
	char *cause = NULL;
	const char *doc = ncases[0].text, *none = ncases[1].text;
	char sha[65];
	struct notif_conf nc;
	struct stat sb;

	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(dir, sizeof dir, "%s/d", top); /* notif_set creates it */
	ck_assert_int_eq(asprintf(&path, "%s/notify.json", dir) > 0, 1);
	ck_assert_int_eq(notif_set(dir, "{", 1, &cause), PLAN_EXIT_INVALID);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(notif_set(dir, doc, strlen(doc), &cause), 0);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	ck_assert_int_eq(stat(dir, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0700);
	ck_assert_int_eq(notif_load(dir, &nc, sha, &cause), 0);
	ck_assert_uint_eq(nc.n, 1);
	ck_assert_str_eq(nc.t[0].name, "phone");
	ck_assert_str_eq(nc.t[0].secret, "s3");
	ck_assert_int_eq(nc.t[0].format, NOTIF_FORMAT_FEISHU);
	ck_assert_uint_eq(
	    nc.t[0].events, (1u << NOTIF_JOB_FINISHED) | (1u << NOTIF_STOPPED));
	ck_assert_uint_eq(strlen(sha), 64);
	notif_free(&nc);
	/* No target: the file goes. */
	ck_assert_int_eq(notif_set(dir, none, strlen(none), &cause), 0);
	ck_assert_int_eq(stat(path, &sb), -1);
	ck_assert_int_eq(notif_load(dir, &nc, NULL, &cause), 1);
	ck_assert_int_eq(notif_set(dir, none, strlen(none), &cause), 0);
	rmdir(dir);
	rmdir(top);
	free(path);
}
END_TEST

/* What the controller writes, the agent reads, with the same SHA-256. */
START_TEST(controller_doc)
{
	struct config_notify ns[3];
	struct config cf;
	struct notif_conf nc;
	char sha[65], asha[65], *doc, *why = NULL, *cause = NULL;
	char dir[] = "/tmp/gpufleet-notify-XXXXXX";

	memset(&cf, 0, sizeof cf);
	memset(ns, 0, sizeof ns);
	ns[0].name = "laptop";
	ns[0].url = "https://hooks.slack.com/services/T/B/X";
	ns[0].format = NOTIFY_FORMAT_SLACK;
	ns[0].events = NOTIFY_EVENTS_ALL;
	ns[1].name = "ding";
	ns[1].url = "https://oapi.dingtalk.com/robot/send?access_token=t";
	ns[1].format = NOTIFY_FORMAT_DINGTALK;
	ns[1].events = (1u << NOTIFY_JOB_FAILED) | (1u << NOTIFY_GUARD);
	ns[1].from_instances = 1;
	ns[2].name = "guards";
	ns[2].url = "https://ntfy.sh/x";
	ns[2].format = NOTIFY_FORMAT_NTFY;
	ns[2].events = 1u << NOTIFY_GUARD; /* nothing an instance sends */
	ns[2].from_instances = 1;
	cf.notifies = ns;
	cf.nnotifies = 3;
	ck_assert_int_eq(notify_any_from_instances(&cf), 1);
	doc = notify_instance_doc(&cf, "a100-1", sha, &why);
	ck_assert_ptr_null(why);
	ck_assert_str_eq(doc,
	    "{\"version\":1,\"targets\":[{\"name\":\"ding\",\"format\":"
	    "\"dingtalk\",\"url\":\"https://oapi.dingtalk.com/robot/send?"
	    "access_token=t\",\"secret\":null,\"events\":[\"job_failed\"],"
	    "\"instance\":"
	    "\"a100-1\"}]}");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(notif_set(dir, doc, strlen(doc), &cause), 0);
	ck_assert_int_eq(notif_load(dir, &nc, asha, &cause), 0);
	ck_assert_str_eq(asha, sha);
	ck_assert_uint_eq(nc.n, 1);
	ck_assert_ptr_null(nc.t[0].secret);
	notif_free(&nc);
	free(doc);
	/* None from_instances: the empty list, which removes the file. */
	ns[1].from_instances = ns[2].from_instances = 0;
	ck_assert_int_eq(notify_any_from_instances(&cf), 0);
	doc = notify_instance_doc(&cf, "a100-1", sha, &why);
	ck_assert_str_eq(doc, "{\"version\":1,\"targets\":[]}");
	ck_assert_int_eq(notif_set(dir, doc, strlen(doc), &cause), 0);
	ck_assert_int_eq(notif_load(dir, &nc, NULL, &cause), 1);
	free(doc);
	rmdir(dir);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("agent_notify");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, bodies_equal);
	tcase_add_test(tc, text_equal);
	tcase_add_test(tc, verdicts);
	tcase_add_loop_test(
	    tc, notify_json_valid, 0, sizeof ncases / sizeof ncases[0]);
	tcase_add_test(tc, notify_set_file);
	tcase_add_test(tc, controller_doc);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
