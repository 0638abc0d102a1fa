/* The report: every table as aligned text, or with --csv as CSV (RFC 4180) on stdout with the text
 * and the checks on stderr, so that `crash_sim --csv > out.csv` gives a file any CSV reader takes.
 *
 * The CSV is long-form, one number a record, because the tables have different columns:
 *   table,row,measure,value
 *   movement,node-16 of 50 crashes (50 -> 49),hash % N,0.98015
 * Fields are quoted when they hold a comma, a quote or a line break; records end with CRLF. A cell
 * that does not apply has no record. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "crash_sim.h"

static bool        csv;
static int         failures;
static const char *table_name, *column[3];

FILE *report_text(void)
{
    return csv ? stderr : stdout;
}

static void csv_field(const char *text)
{
    if (!strpbrk(text, ",\"\r\n")) {
        fputs(text, stdout);
        return;
    }
    putchar('"');
    for (const char *c = text; *c; c++) {
        if (*c == '"')
            putchar('"'); /* a quote inside a quoted field is doubled */
        putchar(*c);
    }
    putchar('"');
}

static void csv_record(const char *table, const char *row, const char *measure, const char *value)
{
    csv_field(table);
    putchar(',');
    csv_field(row);
    putchar(',');
    csv_field(measure);
    putchar(',');
    csv_field(value);
    fputs("\r\n", stdout);
}

void report_start(bool as_csv)
{
    csv = as_csv;
    if (csv)
        csv_record("table", "row", "measure", "value");
}

void report_table(const char *name, const char *title, const char *a, const char *b, const char *c)
{
    table_name = name;
    column[0] = a;
    column[1] = b;
    column[2] = c;
    fprintf(report_text(), "\n%s\n  %-38s %10s %10s %10s\n", title, "", a, b, c);
}

void report_value(const char *table, const char *row, const char *measure, double value)
{
    if (!csv)
        return;
    char text[32];
    snprintf(text, sizeof text, "%.10g", value);
    csv_record(table, row, measure, text);
}

void report_row(const char *label, double a, double b, double c)
{
    double v[3] = { a, b, c };
    FILE *out = report_text();
    fprintf(out, "  %-38s", label);
    for (int i = 0; i < 3; i++) {
        if (isnan(v[i]))
            fprintf(out, " %10s", "-");
        else
            fprintf(out, " %10.4f", v[i]);
    }
    fputc('\n', out);
    for (int i = 0; i < 3; i++)
        if (!isnan(v[i]))
            report_value(table_name, label, column[i], v[i]);
}

void report_check(bool ok, const char *fmt, ...)
{
    FILE *out = report_text();
    va_list ap;
    va_start(ap, fmt);
    fprintf(out, "  [%s] ", ok ? "ok" : "FAILED");
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    va_end(ap);
    failures += !ok;
}

int report_failures(void)
{
    return failures;
}
