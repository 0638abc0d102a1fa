/* The version the library reports is the one its headers and its build say. */
#include <criterion/criterion.h>
#include <shard.h>
#include <stdio.h>

Test(version, number_and_string_agree_with_the_header)
{
    cr_assert_eq(shard_version(), (unsigned)SHARD_VERSION_HEX);
    cr_assert_eq(shard_version() >> 16, (unsigned)SHARD_VERSION_MAJOR);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", SHARD_VERSION_MAJOR, SHARD_VERSION_MINOR, SHARD_VERSION_PATCH);
    cr_assert_str_eq(shard_version_string(), want);
}
