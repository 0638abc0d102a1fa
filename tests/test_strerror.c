/* shard_strerror names every code the library returns and never returns NULL. */
#include <criterion/criterion.h>
#include <errno.h>
#include <shard.h>
#include <string.h>

Test(strerror, every_code_has_its_own_text)
{
    const int codes[] = { 0, -EINVAL, -EEXIST, -ENOENT, -ENAMETOOLONG, -ENOMEM, -EAGAIN, -EBUSY, -ESHUTDOWN, -ERANGE };
    size_t n = sizeof codes / sizeof *codes;
    const char *unknown = shard_strerror(-9999);
    for (size_t i = 0; i < n; i++) {
        const char *s = shard_strerror(codes[i]);
        cr_assert_not_null(s);
        cr_assert_neq(strcmp(s, unknown), 0, "code %d has no text of its own", codes[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_neq(strcmp(s, shard_strerror(codes[j])), 0);
    }
    cr_assert_not_null(shard_strerror(5));
}
