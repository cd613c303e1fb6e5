/*
 * The holder's ordered deadlines (src/holder/deadline_list.h): a random run
 * of sets, unsets and due deadlines checked against a plain model (an array
 * of deadlines), and what a list of same-delay deadlines costs: a set at the
 * tail without a step back, however many are in the list.
 * Prints "ok - NAME" / "not ok - NAME" per check (t/websocket/deadline_list.t).
 */
#include <stdio.h>
#include <stdlib.h>

#include "holder/deadline_list.h"

static int failures;

static void check(int ok, const char *name)
{
    printf("%s - %s\n", ok ? "ok" : "not ok", name);
    if (!ok)
        failures++;
}

#define N 500

static struct serow_deadline entries[N];

/* The list is in order, each entry set once, and holds what the model has. */
static int list_agrees(const struct serow_deadline_list *l, const uint64_t *model)
{
    size_t in_list = 0, in_model = 0;
    uint64_t last = 0;
    const struct serow_deadline *prev = NULL;
    for (const struct serow_deadline *d = l->head; d; d = d->next) {
        size_t i = (size_t)(d - entries);
        if (d->prev != prev || d->at_ms < last || model[i] != d->at_ms)
            return 0;
        last = d->at_ms;
        prev = d;
        in_list++;
    }
    if (l->tail != prev)
        return 0;
    for (size_t i = 0; i < N; i++)
        in_model += model[i] != 0;
    return in_list == in_model;
}

int main(void)
{
    struct serow_deadline_list l = {0};
    uint64_t model[N] = {0};
    uint64_t now = 1000;
    int agrees = 1, due_right = 1;
    srand(7);
    for (int step = 0; step < 200000 && agrees && due_right; step++) {
        size_t i = (size_t)rand() % N;
        int what = rand() % 10;
        if (what < 5) { /* set: mostly one delay, sometimes another */
            uint64_t at = now + (rand() % 4 ? 300 : (uint64_t)(rand() % 1000) + 1);
            serow_deadline_set(&l, &entries[i], at);
            model[i] = at;
        } else if (what < 7) {
            serow_deadline_unset(&l, &entries[i]);
            model[i] = 0;
        } else {
            now += (uint64_t)(rand() % 50);
            struct serow_deadline *d;
            while ((d = serow_deadline_due(&l, now)) != NULL) {
                size_t k = (size_t)(d - entries);
                /* the earliest of the model's, and due */
                for (size_t j = 0; j < N; j++)
                    if (model[j] && model[j] < model[k])
                        due_right = 0;
                if (model[k] == 0 || model[k] > now || d->at_ms != 0)
                    due_right = 0;
                model[k] = 0;
            }
            int next = serow_deadline_next(&l, now, -1);
            uint64_t earliest = 0;
            for (size_t j = 0; j < N; j++)
                if (model[j] && (!earliest || model[j] < earliest))
                    earliest = model[j];
            if (earliest ? next != (int)(earliest - now) : next != -1)
                due_right = 0;
        }
        if (!list_agrees(&l, model))
            agrees = 0;
    }
    check(agrees, "a random run of sets and unsets: the list in order, holding what the model holds");
    check(due_right, "the due deadlines taken earliest first, none early; the next one's wait right");
    check(serow_deadline_next(&l, now, 5) <= 5, "serow_deadline_next keeps the smaller of the two");

    /* 10,000 connections of one delay: each set lands at the tail at once */
    static struct serow_deadline many[10000];
    struct serow_deadline_list same = {0};
    int at_tail = 1;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 10000; i++) {
            serow_deadline_set(&same, &many[i], 1000 + (uint64_t)round * 10000 + (uint64_t)i + 300);
            at_tail &= same.tail == &many[i];
        }
    check(at_tail, "same-delay deadlines set in time order: each goes to the tail");
    size_t taken = 0;
    while (serow_deadline_due(&same, 1000 + 2 * 10000 + 300 + 4999))
        taken++;
    check(taken == 5000 && same.head == &many[5000], "the due ones taken from the head, the rest left");
    return failures ? 1 : 0;
}
