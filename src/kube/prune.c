/* kube/prune.c: metadata.managedFields dropped from an object's JSON text before it is parsed.
 *
 * managedFields are a third to a half of a typical object's bytes (../shared/K8S-SEMANTICS.md,
 * section 8) and fleetgate never reads them: translation drops them. Parsing them is most of the
 * cost of parsing a cluster's answer or watch event (jansson allocates a node per value, and
 * fieldsV1 is all small values), so the member is cut out of the text first by a scan
 * (core's fg_json_scan_value), and the parser never sees it.
 *
 * The scan is conservative: it removes a member only where it expects one (the object's
 * "metadata" member's "managedFields" member, keys written plainly), and only when metadata holds
 * it once. Text of any other shape is left as it is, for the parser to judge. What is cut is not
 * validated: a malformed managedFields in an otherwise valid object is dropped unread.
 */
#include "fleetgate/kube.h"

#include <string.h>

/* One member of an object: the key's first quote, the value's span, and where the next member
 * (or the closing brace) begins. */
typedef struct {
    size_t key, value, value_end, next;
} member_t;

/* The member of the object whose '{' is at s[obj] named key (key_len bytes), into *m; the index
 * of the comma before it (0: none) into *comma_before. With once, false also when the key occurs
 * again later in the object. False when it is absent, when a key holds an escape, or when the
 * text is not an object there. */
static bool find_member(const char *s, size_t n, size_t obj, const char *key, size_t key_len,
                        bool once, member_t *m, size_t *comma_before) {
    bool found = false;
    size_t comma = 0, i;
    if (obj >= n || s[obj] != '{')
        return false;
    i = fg_json_scan_ws(s, n, obj + 1);
    if (i < n && s[i] == '}')
        return false;
    while (i < n) {
        member_t cur = {.key = i};
        if (s[i] != '"')
            return false;
        size_t key_end = fg_json_scan_value(s, n, i); /* just after the closing quote */
        if (key_end > n || key_end < i + 2 || s[key_end - 1] != '"' ||
            memchr(s + i + 1, '\\', key_end - i - 2) != NULL)
            return false;
        size_t colon = fg_json_scan_ws(s, n, key_end);
        if (colon >= n || s[colon] != ':')
            return false;
        cur.value = fg_json_scan_ws(s, n, colon + 1);
        cur.value_end = fg_json_scan_value(s, n, cur.value);
        if (cur.value >= n || cur.value_end <= cur.value)
            return false;
        cur.next = fg_json_scan_ws(s, n, cur.value_end);
        if (cur.next >= n || (s[cur.next] != ',' && s[cur.next] != '}'))
            return false;
        if (key_end - i - 2 == key_len && memcmp(s + i + 1, key, key_len) == 0) {
            if (found)
                return false; /* twice: the parser refuses the duplicate */
            found = true;
            *m = cur;
            *comma_before = comma;
            if (!once)
                return true;
        }
        if (s[cur.next] == '}')
            break;
        comma = cur.next;
        i = fg_json_scan_ws(s, n, cur.next + 1);
    }
    return found;
}

/* Where the managedFields member of the object whose '{' is at s[obj] lies, with the comma that
 * goes with it: s[*from, *to) is to be cut. False when there is nothing to cut. */
static bool find_cut(const char *s, size_t n, size_t obj, size_t *from, size_t *to) {
    member_t meta, mf;
    size_t comma;
    if (!find_member(s, n, obj, "metadata", 8, false, &meta, &comma) ||
        !find_member(s, n, meta.value, "managedFields", 13, true, &mf, &comma))
        return false;
    if (s[mf.next] == ',') { /* the member and the comma after it */
        *from = mf.key;
        *to = fg_json_scan_ws(s, n, mf.next + 1);
    } else if (comma != 0) { /* the last member: the comma before it and the member */
        *from = comma;
        *to = mf.value_end;
    } else { /* the only member */
        *from = mf.key;
        *to = mf.value_end;
    }
    return true;
}

/* Prunes the object whose '{' is at s[obj]; returns the new length. */
static size_t prune_object(char *s, size_t n, size_t obj) {
    size_t from, to;
    if (!find_cut(s, n, obj, &from, &to))
        return n;
    memmove(s + from, s + to, n - to);
    return n - (to - from);
}

/* Prunes every object element of the array whose '[' is at s[arr]; returns the new length.
 * The text is compacted as the scan goes (what is kept moves down over what was cut, always
 * below where the scan reads), so a page costs one pass, not one move of its tail per item. */
static size_t prune_items(char *s, size_t n, size_t arr) {
    size_t kept = 0, read = 0; /* s[0, kept) is final; s[read, n) is still the original text */
    if (arr >= n || s[arr] != '[')
        return n;
    size_t i = fg_json_scan_ws(s, n, arr + 1), from, to;
    while (i < n && s[i] != ']') {
        /* the item is scanned whole before anything moves: s[i, n) is still as it came */
        size_t end = fg_json_scan_ws(s, n, fg_json_scan_value(s, n, i));
        if (s[i] == '{' && find_cut(s, n, i, &from, &to)) {
            memmove(s + kept, s + read, from - read);
            kept += from - read;
            read = to;
        }
        if (end >= n || s[end] != ',')
            break;
        i = fg_json_scan_ws(s, n, end + 1);
    }
    memmove(s + kept, s + read, n - read);
    return kept + (n - read);
}

size_t fg_kube_prune_managed_fields(char *text, size_t len, fg_kube_prune_t where) {
    size_t top = fg_json_scan_ws(text, len, 0), comma;
    member_t m;
    switch (where) {
        case FG_KUBE_PRUNE_OBJECT:
            return prune_object(text, len, top);
        case FG_KUBE_PRUNE_EVENT:
            return find_member(text, len, top, "object", 6, false, &m, &comma)
                       ? prune_object(text, len, m.value)
                       : len;
        case FG_KUBE_PRUNE_LIST:
            return find_member(text, len, top, "items", 5, false, &m, &comma)
                       ? prune_items(text, len, m.value)
                       : len;
    }
    return len;
}
