/* The examples' command lines: one table of options per program, parsed the same way everywhere.
 *
 *   --help, -h        prints the usage with every default and range to stdout, exits 0 (1 when
 *                     stdout could not take it, as with >/dev/full)
 *   --name VALUE      or --name=VALUE; a number must be whole, in range, with nothing before or
 *                     after it (no spaces)
 *   --flag            an option without a value
 *   --                ends the options; later arguments are operands
 *
 * Anything else (an unknown option, a missing or malformed value, a number out of range, an operand
 * where the program takes none) is refused with a message on stderr and exit status 2, as getopt
 * programs do. Header-only so that each example stays one file to read; a program may use only some
 * of it (unused is no warning). */
#ifndef SHARD_EXAMPLES_OPTIONS_H
#define SHARD_EXAMPLES_OPTIONS_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum option_kind { OPTION_INT, OPTION_STRING, OPTION_FLAG };

struct option_spec {
    const char      *name; /* with its dashes: "--workers" */
    enum option_kind kind;
    void            *value; /* long long *, const char ** or bool *; holds the default on entry */
    long long        min, max; /* OPTION_INT only: the accepted range */
    const char      *help;
};

struct option_program {
    const char               *name;     /* as printed in messages: "crash_sim" */
    const char               *operands; /* usage text for operands ("NAME[:WEIGHT]..."), or NULL for none */
    const char               *about;    /* one line: what the program shows */
    const struct option_spec *options;
    size_t                    count;
};

__attribute__((unused)) static void options_usage(const struct option_program *p, FILE *to)
{
    fprintf(to, "usage: %s [options]%s%s\n%s\n\noptions:\n", p->name, p->operands ? " " : "",
            p->operands ? p->operands : "", p->about);
    for (size_t i = 0; i < p->count; i++) {
        const struct option_spec *o = &p->options[i];
        switch (o->kind) {
        case OPTION_INT:
            fprintf(to, "  %s N\n      %s (%lld..%lld; default %lld)\n", o->name, o->help, o->min, o->max,
                    *(long long *)o->value);
            break;
        case OPTION_STRING: {
            const char *def = *(const char **)o->value;
            fprintf(to, "  %s VALUE\n      %s (default %s)\n", o->name, o->help, def ? def : "none");
            break;
        }
        case OPTION_FLAG:
            fprintf(to, "  %s\n      %s\n", o->name, o->help);
            break;
        }
    }
    fprintf(to, "  --help\n      print this and exit\n");
}

/* Prints why and exits 2: the status of a command-line mistake. */
__attribute__((noreturn, format(printf, 2, 3), unused)) static void options_refuse(const struct option_program *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", p->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", p->name);
    va_end(ap);
    exit(2);
}

__attribute__((unused)) static void options_set(const struct option_program *p, const struct option_spec *o, const char *text)
{
    if (o->kind == OPTION_STRING) {
        *(const char **)o->value = text;
        return;
    }
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    /* strtoll also skips leading white space: a number starts with its sign or a digit. */
    bool starts = text[0] == '-' || text[0] == '+' || (text[0] >= '0' && text[0] <= '9');
    if (!starts || end == text || *end != '\0')
        options_refuse(p, "%s needs a whole number, not '%s'", o->name, text);
    if (errno == ERANGE || v < o->min || v > o->max)
        options_refuse(p, "%s %s is out of range (%lld..%lld)", o->name, text, o->min, o->max);
    *(long long *)o->value = v;
}

/* Parses argv by p's table, storing each value given over its default. Returns the index of the first
 * operand (argc when there is none); exits as described above on --help and on every mistake. */
__attribute__((unused)) static int options_parse(const struct option_program *p, int argc, char **argv)
{
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break; /* the first operand ("-" is one too) */
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            options_usage(p, stdout);
            exit(fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1); /* a usage that was not written fails */
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (eq && ((len == 6 && strncmp(a, "--help", 6) == 0) || (len == 2 && strncmp(a, "-h", 2) == 0)))
            options_refuse(p, "%.*s takes no value ('%s')", (int)len, a, a);
        const struct option_spec *o = NULL;
        for (size_t k = 0; k < p->count && !o; k++)
            if (strlen(p->options[k].name) == len && strncmp(p->options[k].name, a, len) == 0)
                o = &p->options[k];
        if (!o)
            options_refuse(p, "unknown option '%.*s'", (int)len, a);
        if (o->kind == OPTION_FLAG) {
            if (eq)
                options_refuse(p, "%s takes no value ('%s')", o->name, a);
            *(bool *)o->value = true;
            continue;
        }
        const char *text = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!text)
            options_refuse(p, "%s needs a value", o->name);
        options_set(p, o, text);
    }
    if (i < argc && !p->operands)
        options_refuse(p, "unexpected argument '%s'", argv[i]);
    return i;
}

#endif
