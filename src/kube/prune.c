/* kube/prune.c: what fleetgate never reads, cut from an object's JSON text before it is parsed.
 *
 * metadata.managedFields are a third to a half of a typical object's bytes (../shared/
 * K8S-SEMANTICS.md, section 8) and fleetgate never reads them: translation drops them. Parsing
 * them is most of the cost of parsing a cluster's answer or watch event (jansson allocates a node
 * per value, and fieldsV1 is all small values), so the member is cut out of the text first by a
 * scan (core's fg_json_scan_value), and the parser never sees it. A caller may name one
 * annotation to cut as well (metadata.annotations[name]): the informers cut fleetgate's
 * placement explanation, about 1 KB of escaped JSON on every object fleetgate placed, which the
 * simplified model does not carry (a tenth to a fifth of an event's prune and parse:
 * tests/bench/prune_bench.c).
 *
 * The scan is conservative: it removes a member only where it expects one (keys written
 * plainly), and only when its object holds it once. Text of any other shape is left as it is,
 * for the parser to judge. What is cut is not validated: a malformed managedFields in an
 * otherwise valid object is dropped unread.
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

/* A span of the text to cut, s[from, to). */
typedef struct {
    size_t from, to;
} cut_t;

/* The cut that removes member m with the comma that goes with it (comma_before: the index of
 * the comma before m, 0 when none): the member and the comma after it, else the comma before
 * it and the member (the last member), else the member alone (the only one). */
static cut_t member_cut(const char *s, size_t n, const member_t *m, size_t comma_before) {
    if (s[m->next] == ',')
        return (cut_t){m->key, fg_json_scan_ws(s, n, m->next + 1)};
    if (comma_before != 0)
        return (cut_t){comma_before, m->value_end};
    return (cut_t){m->key, m->value_end};
}

/* The cuts of the object whose '{' is at s[obj], in text order: its metadata.managedFields
 * and, when annotation is not NULL, its metadata.annotations[annotation]. Returns how many. The
 * two never overlap: the second lies inside another member of metadata than the first. */
static size_t find_cuts(const char *s, size_t n, size_t obj, const char *annotation,
                        cut_t cuts[2]) {
    member_t meta, m, ann;
    size_t comma, k = 0;
    if (!find_member(s, n, obj, "metadata", 8, false, &meta, &comma))
        return 0;
    if (find_member(s, n, meta.value, "managedFields", 13, true, &m, &comma))
        cuts[k++] = member_cut(s, n, &m, comma);
    if (annotation != NULL &&
        find_member(s, n, meta.value, "annotations", 11, true, &ann, &comma) &&
        find_member(s, n, ann.value, annotation, strlen(annotation), true, &m, &comma))
        cuts[k++] = member_cut(s, n, &m, comma);
    if (k == 2 && cuts[1].from < cuts[0].from) {
        cut_t first = cuts[1];
        cuts[1] = cuts[0];
        cuts[0] = first;
    }
    return k;
}

/* Prunes the object whose '{' is at s[obj]; returns the new length. */
static size_t prune_object(char *s, size_t n, size_t obj, const char *annotation) {
    cut_t cuts[2];
    for (size_t k = find_cuts(s, n, obj, annotation, cuts); k > 0; k--) { /* the later first */
        memmove(s + cuts[k - 1].from, s + cuts[k - 1].to, n - cuts[k - 1].to);
        n -= cuts[k - 1].to - cuts[k - 1].from;
    }
    return n;
}

/* Prunes every object element of the array whose '[' is at s[arr]; returns the new length.
 * The text is compacted as the scan goes (what is kept moves down over what was cut, always
 * below where the scan reads), so a page costs one pass, not one move of its tail per item. */
static size_t prune_items(char *s, size_t n, size_t arr, const char *annotation) {
    size_t kept = 0, read = 0; /* s[0, kept) is final; s[read, n) is still the original text */
    if (arr >= n || s[arr] != '[')
        return n;
    size_t i = fg_json_scan_ws(s, n, arr + 1);
    while (i < n && s[i] != ']') {
        /* the item is scanned whole before anything moves: s[i, n) is still as it came */
        size_t end = fg_json_scan_ws(s, n, fg_json_scan_value(s, n, i));
        cut_t cuts[2];
        size_t k = s[i] == '{' ? find_cuts(s, n, i, annotation, cuts) : 0;
        for (size_t c = 0; c < k; c++) {
            memmove(s + kept, s + read, cuts[c].from - read);
            kept += cuts[c].from - read;
            read = cuts[c].to;
        }
        if (end >= n || s[end] != ',')
            break;
        i = fg_json_scan_ws(s, n, end + 1);
    }
    memmove(s + kept, s + read, n - read);
    return kept + (n - read);
}

size_t fg_kube_prune(char *text, size_t len, fg_kube_prune_t where, const char *annotation) {
    size_t top = fg_json_scan_ws(text, len, 0), comma;
    member_t m;
    switch (where) {
        case FG_KUBE_PRUNE_OBJECT:
            return prune_object(text, len, top, annotation);
        case FG_KUBE_PRUNE_EVENT:
            return find_member(text, len, top, "object", 6, false, &m, &comma)
                       ? prune_object(text, len, m.value, annotation)
                       : len;
        case FG_KUBE_PRUNE_LIST:
            return find_member(text, len, top, "items", 5, false, &m, &comma)
                       ? prune_items(text, len, m.value, annotation)
                       : len;
    }
    return len;
}
