/*
 * vmhid: the guest's HID helper for tests/vm. Built static on
 * the host by tests/vm/run.sh and put on the VM's second disk; the guest
 * image has no compiler. Two jobs, both through the kernel's own
 * interfaces:
 *
 *   vmhid watch NODE LOG
 *       Another reader of a keyboard's evdev node (/dev/input/eventN):
 *       appends "ready" once the node is open, one "key CODE VALUE" line
 *       per EV_KEY event it reads, and "end N" (N key events in all) when
 *       SIGTERM stops it, after draining what is queued. While scangate
 *       holds the node with EVIOCGRAB it must see none.
 *
 *   vmhid pos FIFO LOG VID PID SERIAL [outputs]
 *       A HID POS barcode scanner (usage page 0x8C) made with /dev/uhid.
 *       Its report descriptor declares the Honeywell scanned-data report of
 *       ../shared/docs/scanner-protocols.md section 2.2: report id 0x02, 64
 *       bytes with the id: byte count, 3 AIM symbology bytes, 56 decoded
 *       data bytes, the two HHP vendor bytes (page 0xFF66), and the
 *       "decode data continued" bit in the last byte. Commands, one per
 *       line on FIFO (opened read-write, so writers may come and go):
 *         create ID               create the device (UHID_CREATE2)
 *         destroy ID              destroy it (UHID_DESTROY): an unplug
 *         scan ID AIM HEX         send a scan: HEX (its bytes) cut into
 *                                 56-byte pieces, the continued bit on all
 *                                 but the last (AIM: 3 characters, ]d2)
 *         torn ID AIM HEX         the same without its last report
 *       After each command LOG gets "done ID" (or "fail ID why"); the
 *       device's events from the kernel are logged as "open" / "close"
 *       (a reader of its hidraw node came or went) and "start" / "stop".
 *       With "outputs", the descriptor also declares output report 3 on
 *       the Bar Code Scanner page (what a scanner that can be told
 *       something offers): Good Read LED (0x7D) in bit 0, three
 *       constant bits, Sound Error Beep, Sound Good Read Beep and Sound Not
 *       On File Beep (0x85..0x87) in bits 4-6, a constant bit 7 (the same
 *       bytes as tests/hid_feedback.rs's VM_WITH_OUTPUTS). Every output
 *       report the kernel hands the device (UHID_OUTPUT: a write to its
 *       hidraw node) is logged as "output HEX" (the bytes written, report
 *       id first); a SET_REPORT request as "set_report HEX" (answered, so
 *       the writer does not wait for a time-out).
 *
 *   vmhid descriptor [outputs]
 *       Print the report descriptor (hex) a `pos` device is made with.
 *
 * Every LOG line starts with the guest's CLOCK_MONOTONIC in seconds
 * ("12.345 done 4"), so the host can time what happened in the guest.
 * Linux's uapi headers give the layouts (linux/uhid.h, linux/input.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/input.h>
#include <linux/uhid.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *logf;

/* One log line, after the guest's CLOCK_MONOTONIC in seconds. */
static void say(const char *fmt, ...)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	fprintf(logf, "%lld.%03ld ", (long long)now.tv_sec, now.tv_nsec / 1000000);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(logf, fmt, ap);
	va_end(ap);
	fputc('\n', logf);
	fflush(logf);
}

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static int watch(const char *node)
{
	int fd = open(node, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		say("fail open %s: %s", node, strerror(errno));
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	say("ready");
	long keys = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int stop = stopping;
		int r = poll(&p, 1, stop ? 0 : 100);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (stop)
				break;
			continue;
		}
		struct input_event ev[64];
		ssize_t n = read(fd, ev, sizeof ev);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			say("fail read: %s", strerror(errno));
			break;
		}
		for (size_t i = 0; i < (size_t)n / sizeof ev[0]; i++) {
			if (ev[i].type == EV_KEY) {
				keys++;
				say("key %u %d", ev[i].code, ev[i].value);
			}
		}
	}
	say("end %ld", keys);
	return 0;
}

/* The Honeywell HID POS scanned-data report (see the header comment). */
static const unsigned char pos_descriptor[] = {
	0x05, 0x8C,		/* Usage Page (Bar Code Scanner) */
	0x09, 0x02,		/* Usage (Bar Code Scanner) */
	0xA1, 0x01,		/* Collection (Application) */
	0x85, 0x02,		/*   Report ID (2) */
	0x09, 0x12,		/*   Usage (Scanned Data Report) */
	0xA1, 0x02,		/*   Collection (Logical) */
	0x15, 0x00,		/*     Logical Minimum (0) */
	0x26, 0xFF, 0x00,	/*     Logical Maximum (255) */
	0x75, 0x08,		/*     Report Size (8) */
	0x05, 0x01,		/*     Usage Page (Generic Desktop) */
	0x09, 0x3B,		/*     Usage (Byte Count) */
	0x95, 0x01,		/*     Report Count (1) */
	0x81, 0x02,		/*     Input (Data,Var,Abs) */
	0x05, 0x8C,		/*     Usage Page (Bar Code Scanner) */
	0x09, 0xFB,		/*     Usage (Symbology Identifier 1) */
	0x09, 0xFC,		/*     Usage (Symbology Identifier 2) */
	0x09, 0xFD,		/*     Usage (Symbology Identifier 3) */
	0x95, 0x03,		/*     Report Count (3) */
	0x81, 0x02,		/*     Input (Data,Var,Abs) */
	0x09, 0xFE,		/*     Usage (Decoded Data) */
	0x95, 0x38,		/*     Report Count (56) */
	0x82, 0x02, 0x01,	/*     Input (Data,Var,Abs,Buffered Bytes) */
	0x06, 0x66, 0xFF,	/*     Usage Page (Vendor 0xFF66: HHP) */
	0x09, 0x04,		/*     Usage (HHP Code ID) */
	0x09, 0x05,		/*     Usage (HHP Code Modifier) */
	0x95, 0x02,		/*     Report Count (2) */
	0x81, 0x02,		/*     Input (Data,Var,Abs) */
	0x05, 0x8C,		/*     Usage Page (Bar Code Scanner) */
	0x09, 0xFF,		/*     Usage (Decode Data Continued) */
	0x25, 0x01,		/*     Logical Maximum (1) */
	0x75, 0x01,		/*     Report Size (1) */
	0x95, 0x01,		/*     Report Count (1) */
	0x81, 0x02,		/*     Input (Data,Var,Abs) */
	0x75, 0x07,		/*     Report Size (7) */
	0x81, 0x03,		/*     Input (Const): padding */
	0xC0,			/*   End Collection */
	0xC0,			/* End Collection */
};

/* The output report of the "outputs" variant, inserted before the
 * descriptor's final End Collection (inside the Application collection). */
static const unsigned char pos_outputs[] = {
	0x05, 0x8C,		/*   Usage Page (Bar Code Scanner) */
	0x85, 0x03,		/*   Report ID (3) */
	0x15, 0x00,		/*   Logical Minimum (0) */
	0x25, 0x01,		/*   Logical Maximum (1) */
	0x75, 0x01,		/*   Report Size (1) */
	0x09, 0x7D,		/*   Usage (Good Read LED) */
	0x95, 0x01,		/*   Report Count (1) */
	0x91, 0x02,		/*   Output (Data,Var,Abs): bit 0 */
	0x95, 0x03,		/*   Report Count (3) */
	0x91, 0x03,		/*   Output (Const): bits 1-3 */
	0x19, 0x85,		/*   Usage Minimum (Sound Error Beep) */
	0x29, 0x87,		/*   Usage Maximum (Sound Not On File Beep) */
	0x91, 0x02,		/*   Output (Data,Var,Abs): bits 4-6 */
	0x95, 0x01,		/*   Report Count (1) */
	0x91, 0x03,		/*   Output (Const): bit 7 */
};

/* The device's report descriptor into `rd`; its size. */
static size_t descriptor(unsigned char *rd, int outputs)
{
	size_t size = sizeof pos_descriptor;
	memcpy(rd, pos_descriptor, sizeof pos_descriptor);
	if (outputs) {
		/* Before the last End Collection, then that End Collection. */
		memcpy(rd + sizeof pos_descriptor - 1, pos_outputs, sizeof pos_outputs);
		size += sizeof pos_outputs;
		rd[size - 1] = 0xC0;
	}
	return size;
}

#define BLOCK 56
#define REPORT 64

struct pos {
	int uhid;
	int created;
	int outputs;
	unsigned vid, pid;
	const char *serial;
};

static int uhid_write(int fd, const struct uhid_event *ev)
{
	ssize_t n = write(fd, ev, sizeof *ev);
	return n == (ssize_t)sizeof *ev ? 0 : -1;
}

static int pos_create(struct pos *p)
{
	struct uhid_event ev;
	memset(&ev, 0, sizeof ev);
	ev.type = UHID_CREATE2;
	snprintf((char *)ev.u.create2.name, sizeof ev.u.create2.name, "vmhid HID POS scanner");
	snprintf((char *)ev.u.create2.phys, sizeof ev.u.create2.phys, "vmhid/pos0");
	snprintf((char *)ev.u.create2.uniq, sizeof ev.u.create2.uniq, "%s", p->serial);
	ev.u.create2.rd_size = (__u16)descriptor(ev.u.create2.rd_data, p->outputs);
	ev.u.create2.bus = BUS_USB;
	ev.u.create2.vendor = p->vid;
	ev.u.create2.product = p->pid;
	ev.u.create2.version = 1;
	if (uhid_write(p->uhid, &ev) < 0)
		return -1;
	p->created = 1;
	return 0;
}

static int pos_destroy(struct pos *p)
{
	struct uhid_event ev;
	memset(&ev, 0, sizeof ev);
	ev.type = UHID_DESTROY;
	if (uhid_write(p->uhid, &ev) < 0)
		return -1;
	p->created = 0;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Send the reports of one scan; `last` = 0 leaves out the final one. */
static int pos_scan(struct pos *p, const char *aim, const char *hex, int last)
{
	unsigned char data[4096];
	size_t len = 0;
	for (const char *h = hex; h[0] && h[1]; h += 2) {
		int hi = hexval(h[0]), lo = hexval(h[1]);
		if (hi < 0 || lo < 0 || len == sizeof data)
			return -1;
		data[len++] = (unsigned char)(hi << 4 | lo);
	}
	if (strlen(aim) != 3 || !p->created)
		return -1;
	size_t pieces = len == 0 ? 1 : (len + BLOCK - 1) / BLOCK;
	for (size_t i = 0; i < pieces; i++) {
		int final = i + 1 == pieces;
		if (final && !last)
			break;
		size_t off = i * BLOCK;
		size_t n = len - off < BLOCK ? len - off : BLOCK;
		struct uhid_event ev;
		memset(&ev, 0, sizeof ev);
		ev.type = UHID_INPUT2;
		ev.u.input2.size = REPORT;
		unsigned char *r = ev.u.input2.data;
		r[0] = 0x02;
		r[1] = (unsigned char)n;
		memcpy(r + 2, aim, 3);
		memcpy(r + 5, data + off, n);
		r[61] = 'w'; /* HHP code id: Data Matrix */
		r[62] = 0;
		r[63] = final ? 0 : 1;
		if (uhid_write(p->uhid, &ev) < 0)
			return -1;
	}
	return 0;
}

static void pos_command(struct pos *p, char *line)
{
	char *save = NULL;
	char *verb = strtok_r(line, " \t\r\n", &save);
	char *id = strtok_r(NULL, " \t\r\n", &save);
	if (!verb || !id) {
		say("fail ? bad command");
		return;
	}
	int r;
	if (!strcmp(verb, "create")) {
		r = pos_create(p);
	} else if (!strcmp(verb, "destroy")) {
		r = pos_destroy(p);
	} else if (!strcmp(verb, "scan") || !strcmp(verb, "torn")) {
		char *aim = strtok_r(NULL, " \t\r\n", &save);
		char *hex = strtok_r(NULL, " \t\r\n", &save);
		r = aim && hex ? pos_scan(p, aim, hex, !strcmp(verb, "scan")) : -1;
	} else {
		say("fail %s unknown command %s", id, verb);
		return;
	}
	if (r < 0)
		say("fail %s %s: %s", id, verb, strerror(errno));
	else
		say("done %s", id);
}

/* `n` bytes as lowercase hex, into `out` (room for 2 * n + 1). */
static void hex(const unsigned char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}

static void pos_event(struct pos *p)
{
	struct uhid_event ev;
	char h[2 * UHID_DATA_MAX + 1];
	ssize_t n = read(p->uhid, &ev, sizeof ev);
	if (n <= 0)
		return;
	switch (ev.type) {
	case UHID_OUTPUT: {
		size_t size = ev.u.output.size < UHID_DATA_MAX ? ev.u.output.size : UHID_DATA_MAX;
		hex(ev.u.output.data, size, h);
		say("output %s", h);
		break;
	}
	case UHID_SET_REPORT: {
		size_t size = ev.u.set_report.size < UHID_DATA_MAX ? ev.u.set_report.size : UHID_DATA_MAX;
		hex(ev.u.set_report.data, size, h);
		say("set_report %s", h);
		struct uhid_event reply;
		memset(&reply, 0, sizeof reply);
		reply.type = UHID_SET_REPORT_REPLY;
		reply.u.set_report_reply.id = ev.u.set_report.id;
		reply.u.set_report_reply.err = 0;
		uhid_write(p->uhid, &reply);
		break;
	}
	case UHID_GET_REPORT: {
		struct uhid_event reply;
		memset(&reply, 0, sizeof reply);
		reply.type = UHID_GET_REPORT_REPLY;
		reply.u.get_report_reply.id = ev.u.get_report.id;
		reply.u.get_report_reply.err = EIO;
		uhid_write(p->uhid, &reply);
		say("get_report %u", ev.u.get_report.rnum);
		break;
	}
	case UHID_START:
		say("start");
		break;
	case UHID_STOP:
		say("stop");
		break;
	case UHID_OPEN:
		say("open");
		break;
	case UHID_CLOSE:
		say("close");
		break;
	default:
		break;
	}
}

static int pos(const char *fifo, unsigned vid, unsigned pid, const char *serial, int outputs)
{
	struct pos p = { .vid = vid, .pid = pid, .serial = serial, .outputs = outputs };
	p.uhid = open("/dev/uhid", O_RDWR | O_CLOEXEC);
	if (p.uhid < 0) {
		say("fail open /dev/uhid: %s", strerror(errno));
		return 1;
	}
	int cmd = open(fifo, O_RDWR);
	if (cmd < 0) {
		say("fail open %s: %s", fifo, strerror(errno));
		return 1;
	}
	say("ready");
	char buf[16384];
	size_t have = 0;
	for (;;) {
		struct pollfd fds[2] = {
			{ .fd = p.uhid, .events = POLLIN },
			{ .fd = cmd, .events = POLLIN },
		};
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (fds[0].revents & POLLIN)
			pos_event(&p);
		if (fds[1].revents & POLLIN) {
			ssize_t n = read(cmd, buf + have, sizeof buf - 1 - have);
			if (n <= 0)
				continue;
			have += (size_t)n;
			buf[have] = 0;
			char *nl;
			while ((nl = strchr(buf, '\n'))) {
				*nl = 0;
				pos_command(&p, buf);
				have -= (size_t)(nl + 1 - buf);
				memmove(buf, nl + 1, have + 1);
			}
			if (have == sizeof buf - 1)
				have = 0; /* a line too long: dropped */
		}
	}
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "watch")) {
		logf = fopen(argv[3], "a");
		return logf ? watch(argv[2]) : 1;
	}
	if ((argc == 7 || (argc == 8 && !strcmp(argv[7], "outputs"))) && !strcmp(argv[1], "pos")) {
		logf = fopen(argv[3], "a");
		if (!logf)
			return 1;
		return pos(argv[2], (unsigned)strtoul(argv[4], NULL, 16),
			   (unsigned)strtoul(argv[5], NULL, 16), argv[6], argc == 8);
	}
	if ((argc == 2 || (argc == 3 && !strcmp(argv[2], "outputs"))) && !strcmp(argv[1], "descriptor")) {
		unsigned char rd[HID_MAX_DESCRIPTOR_SIZE];
		size_t n = descriptor(rd, argc == 3);
		for (size_t i = 0; i < n; i++)
			printf("%02x", rd[i]);
		printf("\n");
		return 0;
	}
	fprintf(stderr, "usage: vmhid watch NODE LOG | vmhid pos FIFO LOG VID PID SERIAL [outputs]"
		" | vmhid descriptor [outputs]\n");
	return 2;
}
