/* A compiled decode loop for one run of video packets, for bench_video_native.py (a prototype:
 * not part of the package). The caller (ctypes, which releases the GIL for the whole call)
 * passes FFmpeg's functions as pointers taken from the libraries PyAV loaded, an open decoder,
 * the run's packets as one byte buffer with offsets, which rows to keep, and the memory the kept
 * frames are converted into (RGB24, one libswscale call each). Only the leading fields of
 * AVFrame and AVPacket are touched: their layout has been stable across FFmpeg's major versions.
 */
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *data[8];
    int linesize[8];
    uint8_t **extended_data;
    int width, height, nb_samples, format;
} FramePrefix;

typedef struct {
    void *buf;
    int64_t pts, dts;
    uint8_t *data;
    int size;
} PacketPrefix;

typedef struct {
    int (*send_packet)(void *, void *);
    int (*receive_frame)(void *, void *);
    int (*new_packet)(void *, int);
    void (*packet_unref)(void *);
    void (*frame_unref)(void *);
    int (*sws_scale)(void *, const uint8_t *const *, const int *, int, int, uint8_t *const *,
                     const int *);
} Api;

enum { BAD_PACKET = -1, SEND_FAILED = -2, FRAME_CHANGED = -3 };

/* Decodes rows first..last (then drains the decoder); frame k of the run is converted into
 * out + (number of kept frames before it) * width * height * 3 when keep[first + k] is set.
 * Returns the frames decoded, or a negative code. */
int decode_run(const Api *api, void *decoder, void *frame, void *packet, void *scaler,
               const uint8_t *data, const int64_t *offsets, int first, int last,
               const uint8_t *keep, uint8_t *out, int width, int height) {
    int decoded = 0;
    int64_t kept = 0;
    const int64_t frame_bytes = (int64_t)width * height * 3;
    for (int row = first; row <= last + 1; row++) {
        int status;
        if (row <= last) {
            int64_t size = offsets[row + 1] - offsets[row];
            if (size <= 0 || size > INT32_MAX || api->new_packet(packet, (int)size) < 0)
                return BAD_PACKET;
            PacketPrefix *p = (PacketPrefix *)packet;
            memcpy(p->data, data + offsets[row], (size_t)size);
            p->pts = p->dts = row;
            status = api->send_packet(decoder, packet);
            api->packet_unref(packet);
        } else {
            status = api->send_packet(decoder, NULL);
        }
        if (status < 0)
            return SEND_FAILED;
        while (api->receive_frame(decoder, frame) >= 0) {
            FramePrefix *f = (FramePrefix *)frame;
            if (f->width != width || f->height != height || f->format != 0 /* yuv420p */) {
                api->frame_unref(frame);
                return FRAME_CHANGED;
            }
            if (first + decoded <= last && keep[first + decoded]) {
                uint8_t *dst[4] = {out + kept * frame_bytes, NULL, NULL, NULL};
                int stride[4] = {width * 3, 0, 0, 0};
                api->sws_scale(scaler, (const uint8_t *const *)f->data, f->linesize, 0, height,
                               dst, stride);
                kept++;
            }
            decoded++;
            api->frame_unref(frame);
        }
    }
    return decoded;
}
